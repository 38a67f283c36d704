package fault

import (
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// The whole PostgreSQL server is SIGKILLed while three workers relay a steady stream
// and comes back (crash recovery) a second later. Workers lose their connections in
// the middle of claims, publishes and marks; the producer retries its failed
// transactions. Afterwards every committed event is in Kafka, in per-aggregate order,
// no row is left SENDING, and the workers kept running with backoff.
func TestPostgresCrashMidStream(t *testing.T) {
	srv, err := pgtest.Start(pgtest.Options{}) // its own server: this test kills it
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	dsn, db := srv.OpenDatabase(t)
	if err := relaytest.MigrateDefault(db); err != nil {
		t.Fatal(err)
	}
	tp := newTopic(t, "pgcrash")
	const batch = 50
	var ws []*worker
	for _, name := range []string{"pgcrash-1", "pgcrash-2", "pgcrash-3"} {
		ws = append(ws, startWorker(t, name, dsn, "--lease=2s", "--batch-size=50"))
	}
	for _, w := range ws {
		w.waitReady(t)
	}
	prod := startProducer(t, db, tp, 12)
	sent := func() int { return mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE status = 'SENT'`) }
	relaytest.Eventually(t, 30*time.Second, "300 events relayed before the crash", func() bool { return sent() >= 300 })

	atCrash := prod.committed.Load()
	if err := srv.Kill9(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the outage itself: the server stays down for a second
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	dbRestart := dbNow(t, db)
	// From here on count, not mustCount: the crash broke the connections db's pool
	// held, and a query that meets one of them fails once (-1: ask again) until the
	// pool has replaced them.
	relaytest.Eventually(t, 30*time.Second, "a worker relaying again after the restart", func() bool {
		return count(db, `SELECT count(*) FROM public.outbox_event WHERE sent_at > $1`, dbRestart) > 0
	})
	firstSent := time.Since(restarted)
	relaytest.Eventually(t, 30*time.Second, "300 more events committed after the restart", func() bool {
		return prod.committed.Load() >= atCrash+300
	})
	prod.Stop(t)
	relaytest.Eventually(t, 60*time.Second, "every row SENT (expired leases taken over)", func() bool {
		return count(db, `SELECT count(*) FROM public.outbox_event WHERE status <> 'SENT'`) == 0
	})
	drained := time.Since(restarted)

	checkSurvived(t, 40, ws...)
	d := verifyDelivery(t, db, tp)
	t.Logf("events %d (%d committed before the crash), records %d, duplicates %d; producer retried %d transactions; "+
		"first SENT %s after the restart, all SENT %s after it", d.events, atCrash, d.records, d.duplicates,
		prod.retried.Load(), firstSent.Round(time.Millisecond), drained.Round(time.Millisecond))
	if prod.retried.Load() == 0 {
		t.Error("the producer never failed: the crash did not hit the stream")
	}
	// In flight when the server died: per worker at most a batch being marked, one
	// being published and one claimed ahead.
	if max := len(ws) * 3 * batch; d.duplicates > max {
		t.Errorf("%d duplicates, more than %d (3 batches per worker)", d.duplicates, max)
	}
	for _, w := range ws {
		w.Stop(t)
	}
}
