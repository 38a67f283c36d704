package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

func testPipeline(mut ...func(*outboxv1.OutboxPipeline)) *outboxv1.OutboxPipeline {
	p := &outboxv1.OutboxPipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop"},
		Spec: outboxv1.OutboxPipelineSpec{
			Source: outboxv1.PostgresSource{DSNSecretRef: outboxv1.SecretKeyRef{Name: "orders-db", Key: "dsn"}},
			Sink:   outboxv1.KafkaSink{Brokers: []string{"kafka-0:9092", "kafka-1:9092"}},
		},
	}
	for _, m := range mut {
		m(p)
	}
	return p.WithDefaults()
}

func envMap(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := m[e.Name]; dup {
			panic("duplicate env " + e.Name)
		}
		m[e.Name] = e
	}
	return m
}

func assertRestricted(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("pod mounts an API token")
	}
	psc := spec.SecurityContext
	if psc == nil || !*psc.RunAsNonRoot || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context not restricted: %+v", psc)
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || !*sc.RunAsNonRoot ||
			len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || sc.SeccompProfile == nil {
			t.Errorf("container %s security context not restricted: %+v", c.Name, sc)
		}
		for _, e := range c.Env {
			if strings.Contains(e.Value, "postgres://") || strings.Contains(strings.ToLower(e.Name), "password") && e.Value != "" {
				t.Errorf("container %s has a literal secret in %s", c.Name, e.Name)
			}
		}
		if c.Command[0] != RelayBinary {
			t.Errorf("container %s command %v", c.Name, c.Command)
		}
	}
}

func TestDesiredDeployment(t *testing.T) {
	cases := []struct {
		name  string
		p     *outboxv1.OutboxPipeline
		check func(t *testing.T, c corev1.Container, spec corev1.PodSpec, replicas int32)
	}{
		{"defaults", testPipeline(), func(t *testing.T, c corev1.Container, spec corev1.PodSpec, replicas int32) {
			e := envMap(c)
			if ref := e["OUTBOX_DSN"].ValueFrom.SecretKeyRef; ref == nil || ref.Name != "orders-db" || ref.Key != "dsn" || e["OUTBOX_DSN"].Value != "" {
				t.Errorf("OUTBOX_DSN not a secretKeyRef: %+v", e["OUTBOX_DSN"])
			}
			want := map[string]string{
				"OUTBOX_SCHEMA": "public", "OUTBOX_TABLE": "outbox_event", "RELAY_PIPELINE": "orders",
				"KAFKA_BROKERS": "kafka-0:9092,kafka-1:9092", "RELAY_BATCH_SIZE": "500", "RELAY_LEASE": "30s",
				"RELAY_POLL_INTERVAL": "1s", "RELAY_MAX_ATTEMPTS": "12", "RELAY_MIN_BACKOFF": "500ms",
				"RELAY_MAX_BACKOFF": "5m0s", "RELAY_UNKNOWN_TOPIC_GRACE": "5m0s", "RELAY_LOG_LEVEL": "info",
				"RELAY_METRICS_ADDR": ":8080", "RELAY_HEALTH_ADDR": ":8081",
			}
			for k, v := range want {
				if e[k].Value != v {
					t.Errorf("%s = %q, want %q", k, e[k].Value, v)
				}
			}
			if e["RELAY_WORKER_ID"].ValueFrom.FieldRef.FieldPath != "metadata.name" {
				t.Error("RELAY_WORKER_ID not from the pod name")
			}
			if ref := e["GOMEMLIMIT"].ValueFrom; ref == nil || ref.ResourceFieldRef == nil ||
				ref.ResourceFieldRef.Resource != "limits.memory" || ref.ResourceFieldRef.ContainerName != "relay" {
				t.Errorf("GOMEMLIMIT not from the relay container's memory limit: %+v", e["GOMEMLIMIT"])
			}
			for _, k := range []string{"KAFKA_TLS", "KAFKA_SASL_MECHANISM", "KAFKA_SASL_PASSWORD"} {
				if _, ok := e[k]; ok {
					t.Errorf("%s set without tls/sasl", k)
				}
			}
			if replicas != 2 || len(spec.InitContainers) != 0 {
				t.Errorf("replicas %d inits %d", replicas, len(spec.InitContainers))
			}
			if c.Image != "img:1" || !slices.Equal(c.Args, []string{"relay"}) {
				t.Errorf("image %s args %v", c.Image, c.Args)
			}
			if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" {
				t.Error("probes")
			}
			if *spec.TerminationGracePeriodSeconds != 45 {
				t.Errorf("grace %d", *spec.TerminationGracePeriodSeconds)
			}
		}},
		{"tls sasl migrate image paused", testPipeline(func(p *outboxv1.OutboxPipeline) {
			p.Spec.Sink.TLS = &outboxv1.KafkaTLS{Enabled: true, CASecretRef: &outboxv1.SecretKeyRef{Name: "kafka-ca", Key: "ca.pem"}}
			p.Spec.Sink.SASL = &outboxv1.KafkaSASL{Mechanism: "scram-sha-512",
				UsernameSecretRef: outboxv1.SecretKeyRef{Name: "kafka-user", Key: "username"},
				PasswordSecretRef: outboxv1.SecretKeyRef{Name: "kafka-user", Key: "password"}}
			p.Spec.Source.Migrate = true
			p.Spec.Image = "custom:2"
			p.Spec.Paused = true
			p.Spec.Relay.Lease = &metav1.Duration{Duration: 2 * time.Minute}
		}), func(t *testing.T, c corev1.Container, spec corev1.PodSpec, replicas int32) {
			e := envMap(c)
			if e["KAFKA_TLS"].Value != "true" || e["KAFKA_TLS_CA_FILE"].Value != "/etc/outbox/kafka-ca/ca.crt" {
				t.Error("tls env")
			}
			if e["KAFKA_SASL_MECHANISM"].Value != "scram-sha-512" || e["KAFKA_SASL_PASSWORD"].ValueFrom.SecretKeyRef.Key != "password" ||
				e["KAFKA_SASL_USERNAME"].ValueFrom.SecretKeyRef.Name != "kafka-user" {
				t.Error("sasl env")
			}
			if spec.Volumes[0].Secret.SecretName != "kafka-ca" || spec.Volumes[0].Secret.Items[0].Key != "ca.pem" {
				t.Errorf("ca volume %+v", spec.Volumes[0])
			}
			if len(spec.InitContainers) != 1 || spec.InitContainers[0].Args[0] != "migrate" {
				t.Error("migrate init container")
			}
			if ie := envMap(spec.InitContainers[0]); ie["OUTBOX_DSN"].ValueFrom.SecretKeyRef == nil {
				t.Error("migrate DSN")
			}
			if c.Image != "custom:2" || replicas != 0 {
				t.Errorf("image %s replicas %d", c.Image, replicas)
			}
			if *spec.TerminationGracePeriodSeconds != 135 {
				t.Errorf("grace %d", *spec.TerminationGracePeriodSeconds)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DesiredDeployment(tc.p, "img:1", "abc")
			spec := d.Spec.Template.Spec
			assertRestricted(t, spec)
			if d.Name != "orders-relay" || d.Namespace != "shop" || spec.ServiceAccountName != "orders-relay" {
				t.Errorf("names %s/%s sa %s", d.Namespace, d.Name, spec.ServiceAccountName)
			}
			if d.Spec.Template.Annotations[AnnotationSecretHash] != "abc" {
				t.Error("secret hash annotation")
			}
			for k, v := range d.Spec.Selector.MatchLabels {
				if d.Spec.Template.Labels[k] != v {
					t.Error("selector does not match template")
				}
			}
			if d.Labels[LabelManagedBy] != ManagedBy || d.Labels[LabelName] != RelayAppName || d.Labels[LabelInstance] != "orders" {
				t.Errorf("labels %v", d.Labels)
			}
			if d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntVal != 0 {
				t.Error("maxUnavailable")
			}
			tc.check(t, spec.Containers[0], spec, *d.Spec.Replicas)
		})
	}
}

func TestSecretHash(t *testing.T) {
	a := outboxv1.SecretKeyRef{Name: "a", Key: "dsn"}
	b := outboxv1.SecretKeyRef{Name: "b", Key: "pw"}
	uids := map[string]string{"a": "uid-a", "b": "uid-b"}
	vals := func(x, y string) SecretValues {
		return SecretValues{Data: map[outboxv1.SecretKeyRef][]byte{a: []byte(x), b: []byte(y)}, UIDs: uids}
	}
	h1, h2, h3 := SecretHash(vals("x", "y")), SecretHash(vals("x", "y")), SecretHash(vals("x", "z"))
	if h1 != h2 || h1 == h3 || len(h1) != 16 {
		t.Fatalf("hash not stable/sensitive: %s %s %s", h1, h2, h3)
	}
	// Keyed by the Secret's UID: the same values in a recreated Secret hash differently,
	// so nobody without the Secret can check a guess against the annotation.
	other := vals("x", "y")
	other.UIDs = map[string]string{"a": "uid-a2", "b": "uid-b"}
	if SecretHash(other) == h1 {
		t.Fatal("hash does not depend on the Secret's UID")
	}
}

func TestSecretRefs(t *testing.T) {
	p := testPipeline(func(p *outboxv1.OutboxPipeline) {
		p.Spec.Sink.SASL = &outboxv1.KafkaSASL{Mechanism: "plain",
			UsernameSecretRef: outboxv1.SecretKeyRef{Name: "k", Key: "u"},
			PasswordSecretRef: outboxv1.SecretKeyRef{Name: "k", Key: "p"}}
		p.Spec.Sink.TLS = &outboxv1.KafkaTLS{Enabled: false, CASecretRef: &outboxv1.SecretKeyRef{Name: "ca", Key: "c"}}
	})
	var paths []string
	for _, r := range SecretRefs(p) {
		paths = append(paths, r.Path)
	}
	want := []string{"spec.source.dsnSecretRef", "spec.sink.sasl.usernameSecretRef", "spec.sink.sasl.passwordSecretRef"}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths %v", paths)
	}
}

func TestServicePDBServiceAccount(t *testing.T) {
	p := testPipeline()
	sa := DesiredServiceAccount(p)
	if *sa.AutomountServiceAccountToken || sa.Name != "orders-relay" {
		t.Error("service account")
	}
	svc := DesiredService(p)
	if svc.Spec.Ports[0].Port != 8080 || svc.Spec.Selector[LabelInstance] != "orders" || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("service %+v", svc.Spec)
	}
	pdb := DesiredPDB(p)
	if pdb.Spec.MaxUnavailable.IntVal != 1 || pdb.Spec.Selector.MatchLabels[LabelInstance] != "orders" {
		t.Errorf("pdb %+v", pdb.Spec)
	}
}

func TestDesiredReplayJob(t *testing.T) {
	after := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	r := (&outboxv1.DeadLetterReplay{
		ObjectMeta: metav1.ObjectMeta{Name: "fix-1234", Namespace: "shop", UID: "u-1"},
		Spec: outboxv1.DeadLetterReplaySpec{
			PipelineRef: outboxv1.PipelineReference{Name: "orders"},
			Selector:    outboxv1.ReplaySelector{EventType: "OrderPlaced", EventIDs: []string{"e1", "e2"}, CreatedAfter: &after},
			Reason:      "INC-1234 consumer fixed",
			DryRun:      true,
		},
	}).WithDefaults()
	j := DesiredReplayJob(r, testPipeline(), "img:1")
	if j.Name != "fix-1234-replay" || *j.Spec.BackoffLimit != 3 {
		t.Errorf("job %s", j.Name)
	}
	spec := j.Spec.Template.Spec
	assertRestricted(t, spec)
	if spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Error("restart policy")
	}
	want := []string{"replay", "--replay-id=shop/fix-1234/u-1", "--reason=INC-1234 consumer fixed", "--rate=100",
		"--canary-size=10", "--max-new-dead-percent=10", "--dry-run", "--event-ids=e1,e2", "--event-type=OrderPlaced",
		"--created-after=2026-01-02T03:04:05Z"}
	if got := spec.Containers[0].Args; !slices.Equal(got, want) {
		t.Errorf("args\n got %q\nwant %q", got, want)
	}
	if e := envMap(spec.Containers[0]); e["OUTBOX_DSN"].ValueFrom.SecretKeyRef == nil || e["KAFKA_BROKERS"].Value != "" {
		t.Error("replay env")
	}
}

func TestDesiredRetentionCronJob(t *testing.T) {
	rp := (&outboxv1.RetentionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop"},
		Spec: outboxv1.RetentionPolicySpec{
			PipelineRef:          outboxv1.PipelineReference{Name: "orders"},
			ConsumerLogRetention: &metav1.Duration{Duration: 48 * time.Hour},
			Suspend:              true,
			TimeZone:             ptr.To("Europe/Berlin"),
		},
	}).WithDefaults()
	cj := DesiredRetentionCronJob(rp, testPipeline(), "img:1")
	if cj.Name != "orders-retention" || cj.Spec.Schedule != "15 * * * *" || !*cj.Spec.Suspend || *cj.Spec.TimeZone != "Europe/Berlin" {
		t.Errorf("cronjob %+v", cj.Spec)
	}
	if cj.Spec.ConcurrencyPolicy != "Forbid" {
		t.Error("concurrency")
	}
	spec := cj.Spec.JobTemplate.Spec.Template.Spec
	assertRestricted(t, spec)
	want := []string{"archive", "--policy=shop/orders", "--sent-retention=168h0m0s", "--dead-retention=720h0m0s", "--mode=archive", "--batch-size=1000", "--consumer-log-retention=48h0m0s"}
	if got := spec.Containers[0].Args; !slices.Equal(got, want) {
		t.Errorf("args\n got %q\nwant %q", got, want)
	}
	if e := envMap(spec.Containers[0]); e["KAFKA_BROKERS"].Value != "" {
		t.Error("archive needs no broker settings")
	}
}

// The replay and retention Job pods of a pipeline match the relay Deployment's
// (immutable) selector; the metrics Service, the PDB and the topology spread must
// select the workers alone.
func TestWorkerSelectorLeavesJobPodsOut(t *testing.T) {
	p := testPipeline()
	matches := func(sel, labels map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return true
	}
	d := DesiredDeployment(p, "img:1", "")
	replay := DesiredReplayJob((&outboxv1.DeadLetterReplay{
		ObjectMeta: metav1.ObjectMeta{Name: "fix", Namespace: "shop", UID: "u"},
		Spec:       outboxv1.DeadLetterReplaySpec{PipelineRef: outboxv1.PipelineReference{Name: p.Name}, Reason: "r"},
	}).WithDefaults(), p, "img:1")
	retention := DesiredRetentionCronJob((&outboxv1.RetentionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "keep", Namespace: "shop"},
		Spec:       outboxv1.RetentionPolicySpec{PipelineRef: outboxv1.PipelineReference{Name: p.Name}},
	}).WithDefaults(), p, "img:1")
	worker := d.Spec.Template.Labels
	jobPods := map[string]map[string]string{
		"replay":    replay.Spec.Template.Labels,
		"retention": retention.Spec.JobTemplate.Spec.Template.Labels,
	}
	selectors := map[string]map[string]string{
		"service":  DesiredService(p).Spec.Selector,
		"pdb":      DesiredPDB(p).Spec.Selector.MatchLabels,
		"topology": d.Spec.Template.Spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels,
	}
	for name, sel := range selectors {
		if !matches(sel, worker) {
			t.Errorf("%s selector %v does not select the workers %v", name, sel, worker)
		}
		for job, labels := range jobPods {
			if matches(sel, labels) {
				t.Errorf("%s selector %v selects the %s Job pods %v", name, sel, job, labels)
			}
		}
	}
	if !matches(d.Spec.Selector.MatchLabels, worker) {
		t.Errorf("deployment selector %v does not select its own pods", d.Spec.Selector.MatchLabels)
	}
}
