package main_test

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relayproc"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// produceControl answers or holds Produce requests for chosen topics; everything
// else passes through to kfake.
type produceControl struct {
	failTopic atomic.Value // string: answer POLICY_VIOLATION (not retried by kafka-go)
	holdTopic atomic.Value // string: hold the first request until release is closed
	held      chan struct{}
	release   chan struct{}
	holdOnce  sync.Once
	finished  atomic.Bool // the test ended: drop this control at the next request
}

func (pc *produceControl) handle(req kmsg.Request) (kmsg.Response, error, bool) {
	if pc.finished.Load() {
		broker.Cluster.DropControl()
		return nil, nil, false
	}
	broker.Cluster.KeepControl()
	pr, ok := req.(*kmsg.ProduceRequest)
	if !ok || len(pr.Topics) == 0 {
		return nil, nil, false
	}
	tp := pr.Topics[0].Topic
	if f, _ := pc.failTopic.Load().(string); f != "" && tp == f {
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range pr.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = 44 // POLICY_VIOLATION
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	}
	if h, _ := pc.holdTopic.Load().(string); h != "" && tp == h {
		first := false
		pc.holdOnce.Do(func() { first = true })
		if first {
			close(pc.held)
			// The relay's publish deadline passes while the broker sits on the request:
			// an unknown outcome. The request is then stored (a duplicate).
			broker.Cluster.SleepControl(func() { <-pc.release })
		}
	}
	return nil, nil, false
}

// endpointRuns numbers topics so that -count=N, which reuses the broker, gets fresh ones.
var endpointRuns atomic.Int64

// The relay's HTTP endpoints over real HTTP, from the real binary: liveness,
// readiness while relaying, with the database unreachable and on a "hot standby",
// and every contract metric without event ids in any label.
func TestEndpointsOverHTTP(t *testing.T) {
	dsn, db := migrated(t)
	dbName := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	admin, err := sql.Open("postgres", relaytest.PG.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const app = "relay_endpoints_test"
	// Stand-in for a promoted/demoted server: a pg_is_in_recovery() earlier on the
	// search_path than pg_catalog's, driven by a flag row. The relay calls it
	// unqualified, as it runs on a real standby.
	for _, q := range []string{
		`CREATE SCHEMA shadow`,
		`CREATE TABLE shadow.flag (standby boolean NOT NULL)`,
		`INSERT INTO shadow.flag VALUES (false)`,
		`CREATE FUNCTION shadow.pg_is_in_recovery() RETURNS boolean LANGUAGE sql AS 'SELECT standby FROM shadow.flag'`,
		`ALTER DATABASE "` + dbName + `" SET search_path = shadow, pg_catalog, public`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// Ends the relay's sessions so the next ones see changed database settings.
	kickRelay := func() {
		t.Helper()
		if _, err := admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app); err != nil {
			t.Fatal(err)
		}
	}

	run := endpointRuns.Add(1) // -count=N reuses the broker: fresh topics per run
	okTopic, flakyTopic, slowTopic := fmt.Sprintf("endpoints-ok-%d", run), fmt.Sprintf("endpoints-flaky-%d", run), fmt.Sprintf("endpoints-slow-%d", run)
	for _, tp := range []string{okTopic, flakyTopic, slowTopic} {
		if err := broker.CreateTopic(tp, 3); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	evs := relaytest.Many("ep-ok", okTopic, 5)
	badHeaders := `{"n": 1}`
	evs = append(evs, relaytest.Ev{ID: "ep-bad-headers", AggID: "ep-agg-bad", Version: 1, Topic: okTopic, Headers: &badHeaders},
		relaytest.Ev{ID: "ep-expired", AggID: "ep-agg-expired", Version: 1, Topic: okTopic})
	relaytest.Insert(t, db, evs...)
	for _, e := range evs {
		ids = append(ids, e.ID)
	}
	// A worker that crashed left this row SENDING with an expired lease.
	if _, err := db.Exec(`UPDATE public.outbox_event SET status = 'SENDING', owner_token = 'gone/1',
		lease_until = now() - interval '1s', next_retry_at = now() - interval '1s' WHERE event_id = 'ep-expired'`); err != nil {
		t.Fatal(err)
	}

	pc := &produceControl{held: make(chan struct{}), release: make(chan struct{})}
	pc.failTopic.Store("")
	pc.holdTopic.Store("")
	broker.Cluster.ControlKey(int16(kmsg.Produce), pc.handle)
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(pc.release) })
	defer pc.finished.Store(true)

	metricsAddr, healthAddr := freeAddr(t), freeAddr(t)
	p := spawn(t, []string{
		"OUTBOX_DSN=" + dsn + "&application_name=" + app, "KAFKA_BROKERS=" + broker.AddrList(),
		"RELAY_WORKER_ID=" + t.Name(),
	}, "relay", "--metrics-addr="+metricsAddr, "--health-addr="+healthAddr, "--pipeline=endpoints",
		"--poll-interval=100ms", "--lease=2s", "--min-backoff=100ms", "--max-backoff=200ms", "--max-attempts=1000")
	healthz, readyz, metricsURL := "http://"+healthAddr+"/healthz", "http://"+healthAddr+"/readyz", "http://"+metricsAddr+"/metrics"
	status := func(url string) int { c, _ := httpGet(url); return c }

	relaytest.Eventually(t, 15*time.Second, "/healthz 200", func() bool { return status(healthz) == 200 })
	relaytest.Eventually(t, 15*time.Second, "/readyz 200", func() bool { return status(readyz) == 200 })
	relaytest.Eventually(t, 15*time.Second, "first events relayed", func() bool {
		c := relaytest.CountStatus(t, db)
		return c["SENT"] == 6 && c["DEAD"] == 1
	})

	// A transient broker error on one topic while another topic of the batch is stored:
	// the row's own failure (a batch refused as a whole would pause the worker
	// instead), RETRY, then SENT once the broker accepts.
	pc.failTopic.Store(flakyTopic)
	relaytest.Insert(t, db, relaytest.Ev{ID: "ep-flaky-1", AggID: "ep-agg-flaky", Version: 1, Topic: flakyTopic},
		relaytest.Ev{ID: "ep-flaky-ok", AggID: "ep-agg-flaky-ok", Version: 1, Topic: okTopic})
	ids = append(ids, "ep-flaky-1", "ep-flaky-ok")
	relaytest.Eventually(t, 15*time.Second, "flaky event in RETRY", func() bool {
		s := stateOf(t, db, "ep-flaky-1")
		return s.status == "RETRY" && s.retries >= 1
	})
	pc.failTopic.Store("")
	relaytest.Eventually(t, 15*time.Second, "flaky event SENT", func() bool { return stateOf(t, db, "ep-flaky-1").status == "SENT" })

	// The broker sits on a produce past the relay's publish deadline: unknown outcome.
	pc.holdTopic.Store(slowTopic)
	relaytest.Insert(t, db, relaytest.Ev{ID: "ep-slow-1", AggID: "ep-agg-slow", Version: 1, Topic: slowTopic},
		relaytest.Ev{ID: "ep-slow-ok", AggID: "ep-agg-slow-ok", Version: 1, Topic: okTopic})
	ids = append(ids, "ep-slow-1", "ep-slow-ok")
	<-pc.held
	relaytest.Eventually(t, 15*time.Second, "slow event marked unknown outcome", func() bool {
		return stateOf(t, db, "ep-slow-1").code == "SEND_TIMEOUT_UNKNOWN"
	})
	releaseOnce.Do(func() { close(pc.release) })
	relaytest.Eventually(t, 15*time.Second, "slow event SENT", func() bool { return stateOf(t, db, "ep-slow-1").status == "SENT" })

	code, body := httpGet(metricsURL)
	if code != 200 {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	ss, err := relayproc.ParseMetrics(body)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"outbox_pending_count", "outbox_oldest_pending_age_seconds", "outbox_claim_latency_seconds_count",
		"outbox_send_success_total", "outbox_send_retry_total", "outbox_send_dead_total", "outbox_send_unknown_total",
		"outbox_lease_expired_total", "outbox_table_dead_tuples", "outbox_table_live_tuples", "outbox_table_size_bytes"} {
		if _, ok := relayproc.Sum(ss, name, map[string]string{"pipeline": "endpoints"}); !ok {
			t.Errorf("/metrics lacks %s{pipeline=\"endpoints\"}", name)
		}
	}
	expect := func(name string, labels map[string]string, min, max float64) {
		t.Helper()
		v, _ := relayproc.Sum(ss, name, labels)
		if v < min || v > max {
			t.Errorf("%s%v = %v, want [%v, %v]", name, labels, v, min, max)
		}
	}
	expect("outbox_send_success_total", nil, 10, 10)
	expect("outbox_send_success_total", map[string]string{"destination": okTopic}, 8, 8)
	expect("outbox_send_dead_total", map[string]string{"destination": okTopic, "code": "INVALID_HEADERS"}, 1, 1)
	expect("outbox_send_retry_total", map[string]string{"destination": flakyTopic, "code": "KAFKA_ERROR"}, 1, 1e9)
	expect("outbox_send_retry_total", map[string]string{"destination": slowTopic, "code": "SEND_TIMEOUT_UNKNOWN"}, 1, 1e9)
	expect("outbox_send_unknown_total", map[string]string{"destination": slowTopic}, 1, 1e9)
	expect("outbox_lease_expired_total", nil, 1, 1)
	expect("outbox_claim_latency_seconds_count", nil, 1, 1e12)
	// Table health (dead tuples slow claims; docs/worker-contract.md, "Endpoints",
	// lists the gauges): the table holds rows, so its size is positive.
	expect("outbox_table_size_bytes", nil, 1, 1e12)
	for _, s := range ss {
		for k, v := range s.Labels {
			for _, id := range ids {
				if strings.Contains(v, id) {
					t.Errorf("%s has label %s=%q carrying event id %s", s.Name, k, v, id)
				}
			}
		}
	}

	// Database unreachable: not ready with the reason, still live (a restart would not
	// help), ready again once the database is back.
	if _, err := admin.Exec(`ALTER DATABASE "` + dbName + `" WITH ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	kickRelay()
	relaytest.Eventually(t, 15*time.Second, "/readyz 503 with the database unreachable", func() bool {
		c, b := httpGet(readyz)
		return c == 503 && strings.Contains(b, "database error")
	})
	if c := status(healthz); c != 200 {
		t.Errorf("/healthz %d while the database is unreachable; want 200 (the loop still turns)", c)
	}
	if _, err := admin.Exec(`ALTER DATABASE "` + dbName + `" WITH ALLOW_CONNECTIONS true`); err != nil {
		t.Fatal(err)
	}
	relaytest.Eventually(t, 15*time.Second, "/readyz 200 after the database came back", func() bool { return status(readyz) == 200 })

	// Hot standby: writes fail read-only and pg_is_in_recovery() says true.
	for _, q := range []string{`UPDATE shadow.flag SET standby = true`,
		`ALTER DATABASE "` + dbName + `" SET default_transaction_read_only = on`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	kickRelay()
	relaytest.Eventually(t, 15*time.Second, "/readyz 503 on a hot standby", func() bool {
		c, b := httpGet(readyz)
		return c == 503 && strings.Contains(b, "hot standby")
	})
	if c := status(healthz); c != 200 {
		t.Errorf("/healthz %d on a hot standby; want 200", c)
	}
	for _, q := range []string{`ALTER DATABASE "` + dbName + `" RESET default_transaction_read_only`} {
		if _, err := admin.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := db.Exec(`SET default_transaction_read_only = off; UPDATE shadow.flag SET standby = false`); err != nil {
		t.Fatal(err)
	}
	kickRelay()
	relaytest.Eventually(t, 15*time.Second, "/readyz 200 on the primary again", func() bool { return status(readyz) == 200 })
	relaytest.Insert(t, db, relaytest.Ev{ID: "ep-after", AggID: "ep-agg-after", Version: 1, Topic: okTopic})
	relaytest.Eventually(t, 15*time.Second, "relaying again", func() bool { return stateOf(t, db, "ep-after").status == "SENT" })
	p.Stop(t)
	if testing.Verbose() {
		fmt.Fprintln(os.Stderr, p.Stderr())
	}
}
