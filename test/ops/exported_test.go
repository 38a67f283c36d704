package ops

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kmsg"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/inbox"
	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/testenv/localstack"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relayproc"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// Every metric name the alerts and the dashboard use is exported by a real process:
// a relay worker (scraped), the manager binary (scraped), or the inbox library's
// collectors. A misspelt or renamed metric makes an alert that can never fire.
func TestEveryUsedMetricIsExported(t *testing.T) {
	used := usedMetrics(t)
	s := needStack(t)

	relay := scrapeRelay(t, s)
	manager := scrapeManager(t, s)
	consumer := inboxMetricNames(t)

	var missing []string
	for name, where := range used {
		if !relay[name] && !manager[name] && !consumer[name] {
			missing = append(missing, fmt.Sprintf("%s (used by %s)", name, strings.Join(where, "; ")))
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("not exported by the relay, the manager or the inbox collectors: %s", m)
	}
	// The manager's own metrics are documented.
	doc := string(readFile(t, repo("docs", "monitoring.md")))
	for name := range manager {
		if strings.HasPrefix(name, "outbox_") && !strings.HasSuffix(name, "_bucket") && !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("the manager exports %s, which docs/monitoring.md does not document", name)
		}
	}
}

// families parses a /metrics body into names: each family's name and, for
// histograms and summaries, the series names PromQL sees (_bucket, _sum, _count).
func families(t *testing.T, body string) map[string]bool {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]bool{}
	for name, mf := range mfs {
		if len(mf.GetMetric()) == 0 {
			continue
		}
		out[name] = true
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM:
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			out[name+"_sum"], out[name+"_count"] = true, true
		}
	}
	return out
}

func scrape(url string) (int, string) { return relayproc.HTTPGet(url) }

var topicSeq atomic.Int64

// scrapeRelay runs `relayworker relay` against a fresh database and the stack's
// broker, with one topic that works and three the broker refuses in the ways that
// feed the labelled counters (retry, dead, unknown outcome), and returns the names on
// its /metrics once all of them appeared.
func scrapeRelay(t *testing.T, s *localstack.Stack) map[string]bool {
	t.Helper()
	relaytest.PG = s.PG
	dsn, db := relaytest.NewDB(t)
	n := topicSeq.Add(1)
	ok, retry, dead, unknown := fmt.Sprintf("ops-ok-%d", n), fmt.Sprintf("ops-retry-%d", n), fmt.Sprintf("ops-dead-%d", n), fmt.Sprintf("ops-unknown-%d", n)
	codes := map[string]int16{
		retry:   6,  // NOT_LEADER_FOR_PARTITION: Transient, the rows back off (RETRY)
		dead:    10, // MESSAGE_TOO_LARGE: Permanent, DEAD at once
		unknown: 7,  // REQUEST_TIMED_OUT: the write may be stored, unknown outcome
	}
	for _, tp := range []string{ok, retry, dead, unknown} {
		if err := s.Broker.CreateTopic(tp, 1); err != nil {
			t.Fatal(err)
		}
	}
	s.Broker.Cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		s.Broker.Cluster.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		hit := false
		for _, tp := range pr.Topics {
			_, bad := codes[tp.Topic]
			hit = hit || bad
		}
		if !hit {
			return nil, nil, false
		}
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, tp := range pr.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = tp.Topic
			code, bad := codes[tp.Topic]
			if !bad {
				code = 6 // a good topic in a mixed request is simply retried
			}
			for _, p := range tp.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	relaytest.Insert(t, db,
		relaytest.Ev{ID: "ok", AggID: "a1", Version: 1, Topic: ok},
		relaytest.Ev{ID: "retry", AggID: "a2", Version: 1, Topic: retry},
		relaytest.Ev{ID: "dead", AggID: "a3", Version: 1, Topic: dead},
		relaytest.Ev{ID: "unknown", AggID: "a4", Version: 1, Topic: unknown},
	)
	metricsAddr, healthAddr := relayproc.FreeAddr(t), relayproc.FreeAddr(t)
	env := []string{contract.EnvDSN + "=" + dsn, contract.EnvBrokers + "=" + s.Broker.AddrList(),
		contract.EnvWorkerID + "=ops-relay", contract.EnvPipeline + "=orders"}
	p := relayproc.Spawn(t, s.BinDir+"/relayworker", env, "relay", "--metrics-addr="+metricsAddr, "--health-addr="+healthAddr,
		"--poll-interval=100ms", "--min-backoff=100ms", "--max-backoff=500ms", "--max-attempts=1000")
	url := "http://" + metricsAddr + "/metrics"
	waitNames(t, p, url, "outbox_send_success_total", "outbox_send_retry_total", "outbox_send_dead_total", "outbox_send_unknown_total")
	// Cut the worker's database connections (as a failover would): its claim and
	// LISTEN loops count the errors by stage, reconnect and carry on.
	if _, err := db.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	return waitNames(t, p, url, "outbox_relay_errors_total")
}

// waitNames scrapes url until every name in want is there, and returns all names.
func waitNames(t *testing.T, p *relayproc.Proc, url string, want ...string) map[string]bool {
	t.Helper()
	var names map[string]bool
	deadline := time.Now().Add(60 * time.Second)
	for {
		if p.Exited() {
			t.Fatalf("relayworker exited: %s", p.Stderr())
		}
		if code, body := scrape(url); code == http.StatusOK {
			names = families(t, body)
			if hasAll(names, want) {
				if !strings.Contains(body, `pipeline="orders"`) {
					t.Errorf("relay metrics lack the pipeline label:\n%s", body)
				}
				return names
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("relay /metrics never showed all of %v; has %v\nstderr:\n%s", want, keys(names), p.Stderr())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// scrapeManager makes the manager binary reconcile a pipeline (with a real table), a
// DeadLetterReplay and a RetentionPolicy, and returns the names on its /metrics once
// the per-pipeline and per-resource series appeared.
func scrapeManager(t *testing.T, s *localstack.Stack) map[string]bool {
	t.Helper()
	ctx := context.Background()
	relaytest.PG = s.PG
	dsn, db := relaytest.NewDB(t)
	relaytest.Insert(t, db, relaytest.Ev{ID: "waiting", AggID: "a", Version: 1, Topic: "orders"})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ops-"}}
	if err := s.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	ref := outboxv1.PipelineReference{Name: "orders"}
	objs := []client.Object{
		localstack.SecretFor(ns.Name, "orders-db", "dsn", dsn),
		// LogicalReplication, so the manager also exports the slot's gauges (it makes the
		// slot; localstack's PostgreSQL runs with wal_level=logical).
		&outboxv1.OutboxPipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "orders"}, Spec: outboxv1.OutboxPipelineSpec{
			Source: outboxv1.PostgresSource{DSNSecretRef: outboxv1.SecretKeyRef{Name: "orders-db", Key: "dsn"},
				Mode: outboxv1.SourceLogicalReplication, Contract: outboxv1.ContractV1}, // LogicalReplication reads v1 tables only
			Sink:       outboxv1.KafkaSink{Brokers: s.Broker.Addrs()},
			Monitoring: outboxv1.MonitoringSettings{StatusInterval: &metav1.Duration{Duration: 5 * time.Second}},
		}},
		&outboxv1.DeadLetterReplay{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "replay"}, Spec: outboxv1.DeadLetterReplaySpec{
			PipelineRef: ref, Selector: outboxv1.ReplaySelector{ErrorCode: "MESSAGE_TOO_LARGE"}, Reason: "test/ops", DryRun: true,
		}},
		&outboxv1.RetentionPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "nightly"}, Spec: outboxv1.RetentionPolicySpec{PipelineRef: ref}},
	}
	for _, o := range objs {
		if err := s.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	series := []string{
		`outbox_pipeline_pending{namespace="` + ns.Name + `",pipeline="orders"} 1`,
		`outbox_pipeline_database_reachable{namespace="` + ns.Name + `",pipeline="orders"} 1`,
		`outbox_pipeline_slot_active{namespace="` + ns.Name + `",pipeline="orders"} 0`,
		`outbox_replay_failed{namespace="` + ns.Name + `",pipeline="orders",replay="replay"}`,
		`outbox_retention_last_run_failed{namespace="` + ns.Name + `",pipeline="orders",policy="nightly"}`,
	}
	deadline := time.Now().Add(60 * time.Second)
	var body string
	for {
		var code int
		if code, body = scrape(managerMetricsURL); code == http.StatusOK && containsAll(body, series) {
			return families(t, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("manager /metrics never showed %v (manager log: %s); last body:\n%s", series, stackLog, grepOutbox(body))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// inboxMetricNames are the names inbox.NewMetrics describes, after registering it
// the way docs/consumers.md says (a registry rejects duplicate or invalid ones).
// Describe rather than Gather: its label sets only appear once messages are handled.
func inboxMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	m := inbox.NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatalf("register inbox metrics: %v", err)
	}
	ch := make(chan *prometheus.Desc, 64)
	go func() { m.Describe(ch); close(ch) }()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	out := map[string]bool{}
	for d := range ch {
		if mm := fq.FindStringSubmatch(d.String()); mm != nil {
			out[mm[1]] = true
		}
	}
	if len(out) == 0 {
		t.Fatal("inbox.NewMetrics describes no metric")
	}
	return out
}

func hasAll(names map[string]bool, want []string) bool {
	for _, w := range want {
		if !names[w] {
			return false
		}
	}
	return true
}

func containsAll(body string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(body, w) {
			return false
		}
	}
	return true
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func grepOutbox(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "outbox_") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
