package controller

import (
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/config"
)

// The operator and the worker speak through env vars and flags (docs/worker-contract.md).
// These tests render the operator's pods and feed exactly their args and env into the
// worker's own parsers, then compare what the worker would run with the spec: a name
// spelled differently on one side, a unit the other side does not parse, or a default
// that wins over the spec fails here, not in a cluster.

// podEnv is the environment a kubelet would give c: literal values as they are,
// secretKeyRefs and fieldRefs as recognisable stand-ins.
func podEnv(c corev1.Container) config.Getenv {
	m := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			m[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			m[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		case e.ValueFrom.FieldRef != nil:
			m[e.Name] = "field:" + e.ValueFrom.FieldRef.FieldPath
		}
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func contractPipeline() *outboxv1.OutboxPipeline {
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	return testPipeline(func(p *outboxv1.OutboxPipeline) {
		p.Spec.Source.Schema, p.Spec.Source.Table, p.Spec.Source.Migrate = "sales", "events_out", true
		p.Spec.Sink.TLS = &outboxv1.KafkaTLS{Enabled: true}
		p.Spec.Sink.SASL = &outboxv1.KafkaSASL{Mechanism: "scram-sha-512",
			UsernameSecretRef: outboxv1.SecretKeyRef{Name: "kafka", Key: "user"},
			PasswordSecretRef: outboxv1.SecretKeyRef{Name: "kafka", Key: "password"}}
		p.Spec.Relay = outboxv1.RelaySettings{BatchSize: 777, Lease: d(45 * time.Second), PollInterval: d(300 * time.Millisecond),
			MaxAttempts: 7, MinBackoff: d(250 * time.Millisecond), MaxBackoff: d(90 * time.Second),
			UnknownTopicGrace: d(2 * time.Minute), LogLevel: "debug"}
	})
}

func TestRelayContainerParsesToTheSpec(t *testing.T) {
	p := contractPipeline()
	spec := DesiredDeployment(p, "img:1", "hash").Spec.Template.Spec
	c := spec.Containers[0]
	cfg, err := config.ParseRelay(c.Args[1:], podEnv(c))
	if err != nil {
		t.Fatalf("the worker refuses what the operator renders: %v", err)
	}
	r := p.Spec.Relay
	checks := []struct {
		what      string
		got, want any
	}{
		{"command", c.Command[0] + " " + c.Args[0], RelayBinary + " relay"},
		{"dsn", cfg.DSN, "secret:orders-db/dsn"},
		{"schema", cfg.Schema, "sales"},
		{"table", cfg.Table, "events_out"},
		{"pipeline", cfg.Pipeline, p.Name},
		{"log level", cfg.LogLevel, "debug"},
		{"brokers", strings.Join(cfg.Brokers, ","), "kafka-0:9092,kafka-1:9092"},
		{"batch size", cfg.BatchSize, int(r.BatchSize)},
		{"lease", cfg.Lease, r.Lease.Duration},
		{"poll interval", cfg.PollInterval, r.PollInterval.Duration},
		{"max attempts", cfg.MaxAttempts, int(r.MaxAttempts)},
		{"min backoff", cfg.MinBackoff, r.MinBackoff.Duration},
		{"max backoff", cfg.MaxBackoff, r.MaxBackoff.Duration},
		{"unknown topic grace", cfg.UnknownTopicGrace, r.UnknownTopicGrace.Duration},
		{"worker id", cfg.WorkerID, "field:metadata.name"},
		{"tls", cfg.KafkaTLS, true},
		{"sasl mechanism", cfg.KafkaSASLMechanism, "scram-sha-512"},
		{"sasl user", cfg.KafkaSASLUsername, "secret:kafka/user"},
		{"sasl password", cfg.KafkaSASLPassword, "secret:kafka/password"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: the worker would run with %v, the spec says %v", ch.what, ch.got, ch.want)
		}
	}
	ports := map[string]string{}
	for _, cp := range c.Ports {
		ports[cp.Name] = ":" + strconv.Itoa(int(cp.ContainerPort))
	}
	if cfg.MetricsAddr != ports["metrics"] || cfg.HealthAddr != ports["health"] {
		t.Errorf("worker listens on %s/%s, the pod declares %v", cfg.MetricsAddr, cfg.HealthAddr, ports)
	}
	if len(spec.InitContainers) != 1 {
		t.Fatalf("%d init containers, want the migrate one", len(spec.InitContainers))
	}
	ic := spec.InitContainers[0]
	m, err := config.ParseMigrate(ic.Args[1:], podEnv(ic))
	if err != nil {
		t.Fatalf("migrate refuses what the operator renders: %v", err)
	}
	if m.DSN != "secret:orders-db/dsn" || m.Schema != "sales" || m.Table != "events_out" {
		t.Errorf("migrate would run against %s %s.%s", m.DSN, m.Schema, m.Table)
	}
}

// In LogicalReplication mode the worker streams from the slot the operator names (and
// makes: it is told not to), and polls young PENDING rows only after the hand-over age.
func TestRelayContainerParsesToTheSpecInLogicalReplicationMode(t *testing.T) {
	p := contractPipeline()
	p.Spec.Source.Mode = outboxv1.SourceLogicalReplication
	p.Spec.Relay.CDCHandoverAfter = &metav1.Duration{Duration: 7 * time.Second}
	c := DesiredDeployment(p, "img:1", "hash").Spec.Template.Spec.Containers[0]
	cfg, err := config.ParseRelay(c.Args[1:], podEnv(c))
	if err != nil {
		t.Fatalf("the worker refuses what the operator renders: %v", err)
	}
	if cfg.SourceMode != contract.SourceLogicalReplication || cfg.Slot != ReplicationSlot(p) || cfg.Publication != ReplicationSlot(p) ||
		cfg.HandoverAfter != 7*time.Second || cfg.CreateSlot {
		t.Errorf("worker config: mode %s slot %s publication %s handover %s create %t; want %s, %s twice, 7s, false",
			cfg.SourceMode, cfg.Slot, cfg.Publication, cfg.HandoverAfter, cfg.CreateSlot, contract.SourceLogicalReplication, ReplicationSlot(p))
	}
	if !contract.ReplicationNameRE.MatchString(ReplicationSlot(p)) {
		t.Errorf("slot name %q is not a valid slot name", ReplicationSlot(p))
	}
	q := contractPipeline()
	q.Name = p.Name + "-other"
	if ReplicationSlot(q) == ReplicationSlot(p) {
		t.Error("two pipelines share a slot name")
	}
	poll := contractPipeline()
	pc := DesiredDeployment(poll, "img:1", "hash").Spec.Template.Spec.Containers[0]
	if pcfg, err := config.ParseRelay(pc.Args[1:], podEnv(pc)); err != nil || pcfg.SourceMode != contract.SourcePolling {
		t.Errorf("a Polling pipeline's worker runs in mode %v (%v)", pcfg, err)
	}
}

// The message format reaches the worker: Native renders nothing (the worker's default),
// CloudEvents the format and a ce_source naming the pipeline by namespace and name.
func TestRelayContainerParsesToTheSpecMessageFormat(t *testing.T) {
	cases := []struct {
		format       outboxv1.MessageFormat
		want, source string
	}{
		{"", contract.FormatNative, "/outbox-operator/sales/events_out"}, // defaulted to Native
		{outboxv1.MessageNative, contract.FormatNative, "/outbox-operator/sales/events_out"},
		{outboxv1.MessageCloudEvents, contract.FormatCloudEvents, "/outbox-operator/shop/orders"},
	}
	for _, tc := range cases {
		p := contractPipeline()
		p.Spec.Message.Format = tc.format
		p = p.WithDefaults()
		c := DesiredDeployment(p, "img:1", "hash").Spec.Template.Spec.Containers[0]
		cfg, err := config.ParseRelay(c.Args[1:], podEnv(c))
		if err != nil {
			t.Fatalf("%q: the worker refuses what the operator renders: %v", tc.format, err)
		}
		if cfg.MessageFormat != tc.want || cfg.CloudEventsSource != tc.source {
			t.Errorf("%q: worker format %s source %s, want %s %s", tc.format, cfg.MessageFormat, cfg.CloudEventsSource, tc.want, tc.source)
		}
		if _, set := envMap(c)[contract.EnvMessageFormat]; set != (tc.format == outboxv1.MessageCloudEvents) {
			t.Errorf("%q: %s rendered %t (Native must leave existing pods unchanged)", tc.format, contract.EnvMessageFormat, set)
		}
	}
}

// spec.monitoring.tracing.otlpEndpoint turns the worker's OTLP export on; unset, the
// relay container has no OTEL_* variable (no tracer, existing pods not rolled).
func TestRelayContainerTracingFollowsTheSpec(t *testing.T) {
	for _, endpoint := range []string{"", "http://otel-collector.observability:4318"} {
		p := contractPipeline()
		p.Spec.Monitoring.Tracing.OTLPEndpoint = endpoint
		c := DesiredDeployment(p.WithDefaults(), "img:1", "hash").Spec.Template.Spec.Containers[0]
		on, err := config.TracingEnabled(podEnv(c))
		if err != nil || on != (endpoint != "") {
			t.Errorf("endpoint %q: worker tracing %t, %v; want %t", endpoint, on, err, endpoint != "")
		}
		if got := envMap(c)[contract.EnvOTLPEndpoint].Value; got != endpoint {
			t.Errorf("endpoint %q: %s = %q", endpoint, contract.EnvOTLPEndpoint, got)
		}
		for name := range envMap(c) {
			if endpoint == "" && strings.HasPrefix(name, "OTEL_") {
				t.Errorf("no endpoint, yet %s is rendered", name)
			}
		}
	}
}

func TestReplayJobParsesToTheSpec(t *testing.T) {
	after := metav1.NewTime(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	r := (&outboxv1.DeadLetterReplay{
		ObjectMeta: metav1.ObjectMeta{Name: "fix-1", Namespace: "shop", UID: "u-1"},
		Spec: outboxv1.DeadLetterReplaySpec{
			PipelineRef: outboxv1.PipelineReference{Name: "orders"},
			Selector:    outboxv1.ReplaySelector{EventType: "OrderPlaced", EventIDs: []string{"e1", "e2"}, CreatedAfter: &after},
			Reason:      "INC-1 consumer fixed",
			Rate:        40,
		},
	}).WithDefaults()
	c := DesiredReplayJob(r, contractPipeline(), "img:1").Spec.Template.Spec.Containers[0]
	cfg, err := config.ParseReplay(c.Args[1:], podEnv(c))
	if err != nil {
		t.Fatalf("replay refuses what the operator renders: %v", err)
	}
	if cfg.ReplayID != ReplayID(r) || cfg.Reason != r.Spec.Reason || cfg.Rate != 40 ||
		cfg.CanarySize != int(*r.Spec.CanarySize) || cfg.MaxNewDeadPercent != int(*r.Spec.MaxNewDeadPercent) {
		t.Errorf("replay would run %+v for spec %+v", cfg, r.Spec)
	}
	if cfg.Selector.EventType != "OrderPlaced" || strings.Join(cfg.Selector.EventIDs, ",") != "e1,e2" ||
		!cfg.Selector.CreatedAfter.Equal(after.Time) {
		t.Errorf("replay selector %+v, spec %+v", cfg.Selector, r.Spec.Selector)
	}
	if cfg.Table != "events_out" || cfg.Schema != "sales" || cfg.DSN != "secret:orders-db/dsn" {
		t.Errorf("replay would run against %s %s.%s", cfg.DSN, cfg.Schema, cfg.Table)
	}
}

func TestConsumerReplayJobParsesToTheSpec(t *testing.T) {
	after := metav1.NewTime(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	before := metav1.NewTime(time.Date(2026, 5, 2, 10, 0, 0, 0, time.UTC))
	r := consumerReplay(func(r *outboxv1.DeadLetterReplay) {
		r.Spec.Consumer.Schema, r.Spec.Consumer.Limit = "billing_inbox", 250
		r.Spec.Rate, r.Spec.RequestedBy = 40, "oncall@example.com"
		r.Spec.Selector = outboxv1.ReplaySelector{EventType: "PaymentSucceeded", EventIDs: []string{"e1", "e2"},
			ErrorCode: "permanent", CreatedAfter: &after, CreatedBefore: &before}
	})
	c := DesiredConsumerReplayJob(r, "img:1").Spec.Template.Spec.Containers[0]
	if c.Command[0]+" "+c.Args[0] != RelayBinary+" "+contract.CommandInboxReplay {
		t.Fatalf("command %v %v", c.Command, c.Args)
	}
	cfg, err := config.ParseInboxReplay(c.Args[1:], podEnv(c))
	if err != nil {
		t.Fatalf("inbox-replay refuses what the operator renders: %v", err)
	}
	s := r.Spec
	checks := []struct {
		what      string
		got, want any
	}{
		{"dsn", cfg.DSN, "secret:billing-db/dsn"},
		{"group", cfg.Group, "billing"},
		{"schema", cfg.Schema, "billing_inbox"},
		{"replay id", cfg.ReplayID, ReplayID(r)},
		{"reason", cfg.Reason, s.Reason},
		{"requested by", cfg.RequestedBy, "oncall@example.com"},
		{"rate", cfg.Rate, float64(40)},
		{"limit", cfg.Limit, 250},
		{"event ids", strings.Join(cfg.Selector.EventIDs, ","), "e1,e2"},
		{"event type", cfg.Selector.EventType, "PaymentSucceeded"},
		{"error code", cfg.Selector.ErrorCode, "permanent"},
		{"parked after", cfg.Selector.ParkedAfter.Equal(after.Time), true},
		{"parked before", cfg.Selector.ParkedBefore.Equal(before.Time), true},
		{"wait timeout", cfg.WaitTimeout, contract.DefaultInboxWaitTimeout},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: the worker would run with %v, the spec says %v", ch.what, ch.got, ch.want)
		}
	}
	// Defaults on both sides agree, and the unset requester falls back to the worker's.
	d, err := config.ParseInboxReplay(DesiredConsumerReplayJob(consumerReplay(), "").Spec.Template.Spec.Containers[0].Args[1:], podEnv(c))
	if err != nil || d.Limit != contract.DefaultInboxReplayLimit || d.Rate != contract.DefaultReplayRate || d.Schema != contract.DefaultSchema {
		t.Errorf("defaults %+v (%v)", d, err)
	}
}

func TestArchiveCronJobParsesToTheSpec(t *testing.T) {
	rp := (&outboxv1.RetentionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop"},
		Spec: outboxv1.RetentionPolicySpec{
			PipelineRef:          outboxv1.PipelineReference{Name: "orders"},
			SentRetention:        &metav1.Duration{Duration: 36 * time.Hour},
			ConsumerLogRetention: &metav1.Duration{Duration: 48 * time.Hour},
			Mode:                 "delete",
			BatchSize:            321,
		},
	}).WithDefaults()
	c := DesiredRetentionCronJob(rp, contractPipeline(), "img:1").Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	cfg, err := config.ParseArchive(c.Args[1:], podEnv(c))
	if err != nil {
		t.Fatalf("archive refuses what the operator renders: %v", err)
	}
	if cfg.SentRetention != 36*time.Hour || cfg.DeadRetention != rp.Spec.DeadRetention.Duration ||
		cfg.ConsumerLogRetention != 48*time.Hour || cfg.Mode != "delete" || cfg.BatchSize != 321 ||
		cfg.Policy != ArchivePolicyKey(rp) {
		t.Errorf("archive would run %+v for spec %+v", cfg, rp.Spec)
	}
	if cfg.Table != "events_out" || cfg.Schema != "sales" {
		t.Errorf("archive would run against %s.%s", cfg.Schema, cfg.Table)
	}
}

// The pod's termination grace leaves the worker its shutdown timeout and a lease.
func TestRelayPodGraceCoversTheWorkersShutdown(t *testing.T) {
	for _, lease := range []time.Duration{time.Second, 30 * time.Second, 10 * time.Minute} {
		p := testPipeline(func(p *outboxv1.OutboxPipeline) { p.Spec.Relay.Lease = &metav1.Duration{Duration: lease} })
		grace := time.Duration(*DesiredDeployment(p, "img:1", "h").Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
		if grace < lease || grace <= contract.DefaultShutdownTimeout {
			t.Errorf("lease %s: grace %s does not cover the lease and the %s shutdown timeout", lease, grace, contract.DefaultShutdownTimeout)
		}
	}
}
