package relay_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/testenv/kafkatest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/logtest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// No broker reachable (a closed port): the worker pauses after the first failed
// produce instead of burning attempts, and says the probe failed. The row keeps
// retry_count 0 and never goes DEAD however long it lasts, readiness says why,
// outbox_broker_up is 0, and the worker-status table tells the operator.
func TestUnreachableBrokerPausesWithoutCountingAttempts(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	relaytest.Insert(t, db, relaytest.Ev{ID: "r1", AggID: "a", Version: 1, Topic: tp})
	logs := &logtest.Lines{}
	w := newWorker(t, dsn, db, "w-down", opts{brokers: []string{"127.0.0.1:1"}, maxAttempts: 2,
		minBackoff: 20 * time.Millisecond, poll: 20 * time.Millisecond, log: logs}).start(t)
	relaytest.Eventually(t, 10*time.Second, "paused", func() bool {
		return testutilCounter(w.m, "outbox_broker_pauses_total") >= 1
	})
	// Many probe rounds (200 ms doubling to 2 s); with attempts counted, 2 would kill it.
	var up bool
	var code string
	var downFor float64
	relaytest.Eventually(t, 10*time.Second, "worker row down for 2s", func() bool {
		if err := db.QueryRow(`SELECT broker_up, coalesce(broker_error_code, ''), coalesce(EXTRACT(EPOCH FROM now() - broker_down_since), 0)
			FROM outbox_event_workers WHERE worker_id = 'w-down'`).Scan(&up, &code, &downFor); err != nil {
			t.Fatal(err)
		}
		return downFor >= 2
	})
	if up || code != "BROKER_UNAVAILABLE" {
		t.Fatalf("worker row: up %v code %q", up, code)
	}
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
	if l := logs.With(`pausing claims`, `"cause":"probe-failed"`, `"code":"BROKER_UNAVAILABLE"`); len(l) != 1 {
		t.Fatalf("%d pause lines saying the probe failed, want 1: %q", len(l), logs.With("pausing"))
	}
	w.stop(t)
	var rows int
	if err := db.QueryRow(`SELECT count(*) FROM outbox_event_workers WHERE worker_id = 'w-down'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Fatal("a cleanly stopped worker left its status row behind")
	}
	newWorker(t, dsn, db, "w-up", opts{}).start(t)
	waitStatus(t, db, "SENT", 1, 10*time.Second)
}

// versions are n aggregates with v versions each, inserted version by version.
func versions(prefix, tp string, n, v int) []relaytest.Ev {
	var evs []relaytest.Ev
	for ver := 1; ver <= v; ver++ {
		for a := 0; a < n; a++ {
			evs = append(evs, relaytest.Ev{ID: fmt.Sprintf("%s-a%d-v%d", prefix, a, ver),
				AggID: fmt.Sprintf("%s-a%d", prefix, a), Version: int64(ver), Topic: tp})
		}
	}
	return evs
}

// The brokers answer metadata with a leader for every partition but refuse every
// produce (the production publisher and prober against kfake): NOT_ENOUGH_REPLICAS
// under acks=all while a broker is in maintenance, REQUEST_TIMED_OUT. The worker
// pauses whatever the probe says, says why, tries one batch per pause wait (a backoff,
// not a hot loop; the gauge stays 0 between trials), counts no attempt, and once the
// brokers accept writes the backlog is SENT within seconds, in per-aggregate order.
func TestEveryProduceRefusedPausesWithTheProductionPublisher(t *testing.T) {
	for _, c := range []struct {
		name string
		kafk int16
		code string
	}{
		{"NOT_ENOUGH_REPLICAS", kafkatest.ErrNotEnoughReplicas, publish.CodeNotEnoughReplicas},
		{"REQUEST_TIMED_OUT", kafkatest.ErrRequestTimedOut, publish.CodeSendTimeoutUnknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn, db := relaytest.NewDB(t)
			tp := topic(t)
			refusal := broker.RefuseProduce(c.kafk, tp)
			t.Cleanup(refusal.Stop)
			evs := versions("e", tp, 5, 4)
			relaytest.Insert(t, db, evs...)
			logs := &logtest.Lines{}
			w := newWorker(t, dsn, db, "w", opts{maxAttempts: 2, poll: 20 * time.Millisecond, log: logs}).start(t)
			relaytest.Eventually(t, 10*time.Second, "paused", func() bool {
				return testutilCounter(w.m, "outbox_broker_up") == 0 && testutilCounter(w.m, "outbox_broker_pauses_total") == 1
			})
			paused := time.Now()
			relaytest.Eventually(t, 15*time.Second, "three trial batches refused", func() bool { return publishes(w.m) >= 4 })
			if took := time.Since(paused); took < 500*time.Millisecond {
				t.Fatalf("three trials within %s of the pause: a hot loop, not a backoff", took)
			}
			if ready, why := w.h.Ready(); ready || !strings.Contains(why, "broker unavailable ("+c.code+")") {
				t.Fatalf("readiness %v %q, want not ready: broker unavailable (%s)", ready, why, c.code)
			}
			if l := logs.With(`pausing claims`, `"cause":"produce-refused"`, `"code":"`+c.code+`"`); len(l) != 1 {
				t.Fatalf("%d pause lines saying every produce was refused, want 1: %q", len(l), logs.With("pausing"))
			}
			counted := 0
			if err := db.QueryRow(`SELECT count(*) FROM outbox_event WHERE retry_count > 0 OR status = 'DEAD'`).Scan(&counted); err != nil {
				t.Fatal(err)
			}
			if counted != 0 {
				t.Fatalf("%d rows had attempts counted or went DEAD while every produce was refused", counted)
			}
			if p := testutilCounter(w.m, "outbox_broker_pauses_total"); p != 1 {
				t.Fatalf("outbox_broker_pauses_total = %v after refused trials, want 1 (a trial does not resume)", p)
			}
			refusal.Set(false)
			back := time.Now()
			waitStatus(t, db, "SENT", len(evs), 10*time.Second)
			t.Logf("%d refused produce requests; backlog SENT %s after the brokers accepted writes",
				refusal.Refused(), time.Since(back).Round(time.Millisecond))
			if got := testutilCounter(w.m, "outbox_send_retry_total"); got != 0 {
				t.Fatalf("outbox_send_retry_total = %v, want 0 (no row was retried)", got)
			}
			if up := testutilCounter(w.m, "outbox_broker_up"); up != 1 {
				t.Fatalf("outbox_broker_up = %v after recovery", up)
			}
			if l := logs.With(`resuming claims`, `"resumedBy":"produce"`); len(l) != 1 {
				t.Fatalf("%d resume lines decided by a produce, want 1: %q", len(l), logs.With("resuming"))
			}
			recs, err := broker.ReadAllWithin(10*time.Second, tp, len(evs))
			if err != nil {
				t.Fatal(err)
			}
			checkAggregateOrder(t, recs)
		})
	}
}

// The brokers go away mid-stream: a batch fails in part first (its failed rows are
// the rows' own failure: RETRY with an attempt and, here, a minute's backoff), then
// every produce is refused and the worker pauses. On resume exactly the rows this
// worker's pause parked are claimable at once; another worker's RETRY rows with the
// same broker code, and this worker's older ones, keep their backoff.
func TestResumeReleasesOnlyTheRowsThisPauseParked(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	good, bad := topic(t), topic(t)
	part := broker.RefuseProduce(kafkatest.ErrNotEnoughReplicas, bad)
	t.Cleanup(part.Stop)
	relaytest.Insert(t, db,
		relaytest.Ev{ID: "g1", AggID: "g", Version: 1, Topic: good},
		relaytest.Ev{ID: "b1", AggID: "b", Version: 1, Topic: bad},
		relaytest.Ev{ID: "foreign", AggID: "f", Version: 1, Topic: good},
		relaytest.Ev{ID: "stale", AggID: "s", Version: 1, Topic: good})
	// Rows backed off by someone else: another worker, and this worker long ago.
	if _, err := db.Exec(`UPDATE outbox_event SET status = 'RETRY', retry_count = 1,
		owner_token = CASE event_id WHEN 'foreign' THEN 'other-worker/00' ELSE 'w/0000' END,
		last_error_code = 'NOT_ENOUGH_REPLICAS', next_retry_at = now() + interval '1 hour'
		WHERE event_id IN ('foreign', 'stale')`); err != nil {
		t.Fatal(err)
	}
	w := newWorker(t, dsn, db, "w", opts{minBackoff: time.Minute, maxBackoff: time.Minute}).start(t)
	relaytest.Eventually(t, 10*time.Second, "g1 SENT, b1 backed off with an attempt", func() bool {
		st := relaytest.CountStatus(t, db)
		return st["SENT"] == 1 && st["RETRY"] == 3
	})
	all := broker.RefuseProduce(kafkatest.ErrNotEnoughReplicas)
	t.Cleanup(all.Stop)
	relaytest.Insert(t, db, relaytest.Ev{ID: "g2", AggID: "g", Version: 2, Topic: good})
	relaytest.Eventually(t, 10*time.Second, "paused", func() bool { return testutilCounter(w.m, "outbox_broker_up") == 0 })
	all.Stop()
	part.Stop()
	relaytest.Eventually(t, 10*time.Second, "g2 and the parked b1 SENT", func() bool {
		return relaytest.CountStatus(t, db)["SENT"] == 3
	})
	var b1Attempts int
	if err := db.QueryRow(`SELECT retry_count FROM outbox_event WHERE event_id = 'b1'`).Scan(&b1Attempts); err != nil {
		t.Fatal(err)
	}
	if b1Attempts != 1 {
		t.Fatalf("b1 retry_count %d, want 1 (the attempt of the partly failed batch stays counted)", b1Attempts)
	}
	rows, err := db.Query(`SELECT event_id, status, next_retry_at > now() + interval '50 minutes' FROM outbox_event
		WHERE event_id IN ('foreign', 'stale')`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id, st string
		var waiting bool
		if err := rows.Scan(&id, &st, &waiting); err != nil {
			t.Fatal(err)
		}
		n++
		if st != "RETRY" || !waiting {
			t.Errorf("%s: %s, still backing off %v; want RETRY with its hour's backoff", id, st, waiting)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d of the 2 foreign rows found", n)
	}
}

// One topic's partitions refuse writes (NOT_LEADER_FOR_PARTITION) while the cluster
// answers and another topic works. A batch holding only that topic's rows stored
// nothing, and from one batch the worker cannot tell a topic from the cluster: it
// pauses without counting. Its trial batches carry the other topic's new events,
// which are stored within seconds and resume it; the failing rows are counted only in
// batches where something else was stored, so they back off and never go DEAD.
func TestOneTopicFailingPausesButOtherTopicsFlow(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	bad, good := topic(t), topic(t)
	refusal := broker.RefuseProduce(6 /* NOT_LEADER_FOR_PARTITION */, bad)
	t.Cleanup(refusal.Stop)
	var evs []relaytest.Ev
	for i := range 5 {
		evs = append(evs,
			relaytest.Ev{ID: fmt.Sprintf("bad-%d", i), AggID: fmt.Sprintf("b%d", i), Version: 1, Topic: bad},
			relaytest.Ev{ID: fmt.Sprintf("good-%d", i), AggID: fmt.Sprintf("g%d", i), Version: 1, Topic: good})
	}
	relaytest.Insert(t, db, evs...)
	w := newWorker(t, dsn, db, "w", opts{maxAttempts: 50, minBackoff: 100 * time.Millisecond}).start(t)
	waitStatus(t, db, "SENT", 5, 10*time.Second)
	relaytest.Eventually(t, 10*time.Second, "paused on a batch of only the failing topic", func() bool {
		return testutilCounter(w.m, "outbox_broker_pauses_total") >= 1
	})
	for round := 1; round <= 3; round++ {
		relaytest.Insert(t, db, relaytest.Ev{ID: fmt.Sprintf("good-late-%d", round), AggID: "late", Version: int64(round), Topic: good})
		waitStatus(t, db, "SENT", 5+round, 10*time.Second)
	}
	var dead, maxAttempts int
	if err := db.QueryRow(`SELECT count(*) FILTER (WHERE status = 'DEAD'), coalesce(max(retry_count), 0)
		FROM outbox_event WHERE destination = $1`, bad).Scan(&dead, &maxAttempts); err != nil {
		t.Fatal(err)
	}
	if dead != 0 || maxAttempts > 4 {
		t.Fatalf("failing topic: %d DEAD, up to %d attempts; want none DEAD and at most 4 (the batches that stored something)", dead, maxAttempts)
	}
	if c := broker.Count(good); c != 8 {
		t.Fatalf("good topic holds %d records, want 8", c)
	}
	if c := broker.Count(bad); c != 0 {
		t.Fatalf("failing topic holds %d records, want 0", c)
	}
}
