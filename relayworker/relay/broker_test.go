package relay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/relaytest"
	"github.com/outbox-operator/outbox-operator/relayworker/relay"
)

// No broker reachable (a closed port): the worker pauses after the first failed
// produce instead of burning attempts. The row keeps retry_count 0 and never goes
// DEAD however long it lasts, readiness says why, outbox_broker_up is 0, and the
// worker-status table tells the operator.
func TestUnreachableBrokerPausesWithoutCountingAttempts(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	relaytest.Insert(t, db, relaytest.Ev{ID: "r1", AggID: "a", Version: 1, Topic: tp})
	w := newWorker(t, dsn, db, "w-down", opts{brokers: []string{"127.0.0.1:1"}, maxAttempts: 2,
		minBackoff: 20 * time.Millisecond, poll: 20 * time.Millisecond}).start(t)
	relaytest.Eventually(t, 10*time.Second, "paused", func() bool {
		return testutilCounter(w.m, "outbox_broker_pauses_total") >= 1
	})
	time.Sleep(3 * time.Second) // many probe rounds; with attempts counted, 2 would kill it
	var status string
	var attempts int
	if err := db.QueryRow(`SELECT status, retry_count FROM outbox_event WHERE event_id = 'r1'`).Scan(&status, &attempts); err != nil {
		t.Fatal(err)
	}
	if status != "PENDING" || attempts != 0 {
		t.Fatalf("row is %s with retry_count %d during the outage, want PENDING with 0", status, attempts)
	}
	if up := testutilCounter(w.m, "outbox_broker_up"); up != 0 {
		t.Fatalf("outbox_broker_up = %v while no broker answers", up)
	}
	if ready, why := w.h.Ready(); ready || !strings.Contains(why, "broker unavailable (BROKER_UNAVAILABLE)") {
		t.Fatalf("readiness %v %q, want not ready: broker unavailable (BROKER_UNAVAILABLE)", ready, why)
	}
	var up bool
	var code string
	var downFor float64
	if err := db.QueryRow(`SELECT broker_up, broker_error_code, EXTRACT(EPOCH FROM now() - broker_down_since)
		FROM outbox_event_workers WHERE worker_id = 'w-down'`).Scan(&up, &code, &downFor); err != nil {
		t.Fatal(err)
	}
	if up || code != "BROKER_UNAVAILABLE" || downFor < 2 {
		t.Fatalf("worker row: up %v code %q down for %.1fs", up, code, downFor)
	}
	w.stop(t)
	var rows int
	_ = db.QueryRow(`SELECT count(*) FROM outbox_event_workers WHERE worker_id = 'w-down'`).Scan(&rows)
	if rows != 0 {
		t.Fatal("a cleanly stopped worker left its status row behind")
	}
	newWorker(t, dsn, db, "w-up", opts{}).start(t)
	waitStatus(t, db, "SENT", 1, 10*time.Second)
}

// Every produce refused with a retriable error (NOT_ENOUGH_REPLICAS on all partitions,
// publisher without a prober): a pause, not attempts; probes thin out (no hot loop);
// once produces succeed the backlog is SENT within seconds and nothing went DEAD.
func TestBrokerWideErrorPausesThenResumes(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	relaytest.Insert(t, db, relaytest.Many("e", tp, 10)...)
	f := &failing{err: kafka.NotEnoughReplicas}
	f.down.Store(true)
	w := newWorker(t, dsn, db, "w", opts{pub: func(p relay.Publisher) relay.Publisher { f.inner = p; return f },
		maxAttempts: 2, poll: 20 * time.Millisecond}).start(t)
	time.Sleep(4 * time.Second)
	if calls := f.calls.Load(); calls < 2 || calls > 12 {
		t.Fatalf("%d produce calls in 4s of outage, want a few (a backoff, not a hot loop)", calls)
	}
	var counted int
	_ = db.QueryRow(`SELECT count(*) FROM outbox_event WHERE retry_count > 0 OR status = 'DEAD'`).Scan(&counted)
	if counted != 0 {
		t.Fatalf("%d rows had attempts counted or went DEAD for a broker-wide failure", counted)
	}
	f.down.Store(false)
	waitStatus(t, db, "SENT", 10, 8*time.Second)
	if got := testutilCounter(w.m, "outbox_send_retry_total"); got != 0 {
		t.Fatalf("outbox_send_retry_total = %v, want 0 (no row was retried)", got)
	}
	if up := testutilCounter(w.m, "outbox_broker_up"); up != 1 {
		t.Fatalf("outbox_broker_up = %v after recovery", up)
	}
}

// One topic's partitions refuse writes (NOT_LEADER_FOR_PARTITION) while the cluster
// answers and another topic works: only that topic's rows back off, with attempts
// counted; the worker never pauses and the other topic's events flow.
func TestOneTopicFailingBacksOffOnlyItsRows(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	bad, good := topic(t), topic(t)
	broker.Cluster.ControlKey(0, kfakeProduceError(bad, 6 /* NOT_LEADER_FOR_PARTITION */))
	for i := 0; i < 5; i++ {
		relaytest.Insert(t, db,
			relaytest.Ev{ID: "bad-" + string(rune('a'+i)), AggID: "b" + string(rune('a'+i)), Version: 1, Topic: bad},
			relaytest.Ev{ID: "good-" + string(rune('a'+i)), AggID: "g" + string(rune('a'+i)), Version: 1, Topic: good})
	}
	w := newWorker(t, dsn, db, "w", opts{maxAttempts: 50, minBackoff: 100 * time.Millisecond}).start(t)
	waitStatus(t, db, "SENT", 5, 10*time.Second)
	relaytest.Eventually(t, 20*time.Second, "bad topic's rows retried with attempts", func() bool {
		var n int
		_ = db.QueryRow(`SELECT count(*) FROM outbox_event WHERE destination = $1 AND status = 'RETRY' AND retry_count >= 2`, bad).Scan(&n)
		return n == 5
	})
	if p := testutilCounter(w.m, "outbox_broker_pauses_total"); p != 0 {
		t.Fatalf("worker paused %v times for one topic's failure", p)
	}
	if c := broker.Count(good); c != 5 {
		t.Fatalf("good topic holds %d records, want 5", c)
	}
}
