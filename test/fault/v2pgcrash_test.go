package fault

import (
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// The PostgreSQL server under a v2 table is SIGKILLed (postmaster and backends) while
// two workers drain a steady stream, and restarted on the same data directory (crash
// recovery) a second later. Ticks, reads, advances, lease rounds and the producer's
// transactions die mid-statement; the workers reconnect, the producer retries. Every
// committed event reaches Kafka in per-aggregate order, nothing is left in the hold
// table, and the workers kept running with backoff.
func TestV2PostgresCrashMidDrain(t *testing.T) {
	srv, err := pgtest.Start(pgtest.Options{}) // its own server: this test kills it
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	dsn, db := v2TableOn(t, srv, "16")
	tp := newTopic(t, "v2pgcrash")
	const batch = 50
	ws := []*worker{
		startWorker(t, "v2pgcrash-1", dsn, "--lease=2s", "--batch-size=50"),
		startWorker(t, "v2pgcrash-2", dsn, "--lease=2s", "--batch-size=50"),
	}
	for _, w := range ws {
		w.waitReady(t)
	}
	prod := startProducer(t, db, tp, 12)
	relaytest.Eventually(t, 30*time.Second, "300 events relayed before the crash", func() bool { return broker.Count(tp) >= 300 })

	atCrash, recsAtCrash := prod.committed.Load(), broker.Count(tp)
	if err := srv.Kill9(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the outage itself: the server stays down for a second
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	relaytest.Eventually(t, 30*time.Second, "a worker relaying again after the restart", func() bool {
		return broker.Count(tp) > max(recsAtCrash, atCrash)
	})
	firstSent := time.Since(restarted)
	relaytest.Eventually(t, 30*time.Second, "300 more events committed after the restart", func() bool {
		return prod.committed.Load() >= atCrash+300
	})
	prod.Stop(t)
	// The crash broke the connections the pool held: drop the idle ones so the checks
	// below run on fresh connections.
	db.SetMaxIdleConns(0)
	relaytest.Eventually(t, 10*time.Second, "the database answering the test", func() bool {
		return count(db, `SELECT count(*) FROM public.outbox_event`) > 0
	})
	db.SetMaxIdleConns(2)

	d := verifyV2(t, db, tp, 60*time.Second)
	drained := time.Since(restarted)
	relaytest.Eventually(t, 10*time.Second, "the hold table empty", func() bool {
		return mustCount(t, db, `SELECT count(*) FROM public.outbox_event_hold`) == 0
	})
	checkSurvived(t, 40, ws...)
	t.Logf("events %d (%d committed before the crash), records %d, duplicates %d; producer retried %d transactions; "+
		"first new record %s after the restart, all on Kafka %s after it", d.events, atCrash, d.records, d.duplicates,
		prod.retried.Load(), firstSent.Round(time.Millisecond), drained.Round(time.Millisecond))
	if prod.retried.Load() == 0 {
		t.Error("the producer never failed: the crash did not hit the stream")
	}
	// In flight when the server died: per worker a batch published and not advanced,
	// and one read ahead.
	if max := len(ws) * 3 * batch; d.duplicates > max {
		t.Errorf("%d duplicates, more than %d (3 batches per worker)", d.duplicates, max)
	}
	for _, w := range ws {
		w.Stop(t)
	}
}
