package fault

import (
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// The whole broker goes off the network (its port refuses connections, open ones are
// cut) for 8 s while two v2 workers with --max-attempts 3 relay a steady stream, then
// flaps (2 s down, 1.5 s up, three times). Throughout, nothing turns DEAD: the workers
// pause for the brokers instead of counting attempts against the events. After the
// last return the hold table empties within seconds and every committed event is in
// Kafka, each aggregate in order.
func TestV2BrokerOutageAndFlapping(t *testing.T) {
	dsn, db := v2Table(t, "16")
	tp := newTopic(t, "v2outage")
	flags := []string{"--lease=3s", "--batch-size=50", "--max-attempts=3"}
	ws := []*worker{startWorker(t, "v2outage-1", dsn, flags...), startWorker(t, "v2outage-2", dsn, flags...)}
	for _, w := range ws {
		w.waitReady(t)
	}
	prod := startProducer(t, db, tp, 12)
	relaytest.Eventually(t, 30*time.Second, "200 events relayed before the outage", func() bool { return broker.Count(tp) >= 200 })
	noDead := func(elapsed time.Duration) {
		if n := mustCount(t, db, `SELECT count(*) FROM public.outbox_event_hold WHERE state = 'DEAD'`); n != 0 {
			t.Fatalf("%d hold rows DEAD %s into the broker's outage", n, elapsed.Round(100*time.Millisecond))
		}
	}

	if err := broker.Unplug(); err != nil {
		t.Fatal(err)
	}
	atUnplug := prod.committed.Load()
	hold(t, 8*time.Second, noDead)
	for _, w := range ws {
		if up := w.metric("outbox_broker_up"); up != 0 {
			t.Fatalf("%s: outbox_broker_up = %v during the outage", w.name, up)
		}
	}
	if prod.committed.Load() < atUnplug+100 {
		t.Fatalf("only %d events committed during the outage: the stream stalled", prod.committed.Load()-atUnplug)
	}
	for range 3 {
		if err := broker.Replug(); err != nil {
			t.Fatal(err)
		}
		hold(t, 1500*time.Millisecond, noDead)
		if err := broker.Unplug(); err != nil {
			t.Fatal(err)
		}
		hold(t, 2*time.Second, noDead)
	}
	if err := broker.Replug(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	atReplug := prod.committed.Load()
	relaytest.Eventually(t, 30*time.Second, "100 more events committed after the last return", func() bool {
		return prod.committed.Load() >= atReplug+100
	})
	prod.Stop(t)
	d := verifyV2(t, db, tp, 30*time.Second)
	caughtUp := time.Since(back)
	relaytest.Eventually(t, 10*time.Second, "the hold table empty after the last return", func() bool {
		return mustCount(t, db, `SELECT count(*) FROM public.outbox_event_hold`) == 0
	})
	noDead(time.Since(back))
	checkSurvived(t, 60, ws...)
	t.Logf("%d events (%d committed from the unplug to the last return), %d records, %d duplicates; all on Kafka %s after the last return; pauses %v and %v",
		d.events, atReplug-atUnplug, d.records, d.duplicates, caughtUp.Round(time.Millisecond),
		ws[0].metric("outbox_broker_pauses_total"), ws[1].metric("outbox_broker_pauses_total"))
	if max := len(ws) * 3 * 50 * 4; d.duplicates > max {
		t.Errorf("%d duplicates, more than %d (3 batches per worker per outage)", d.duplicates, max)
	}
	for _, w := range ws {
		w.Stop(t)
	}
}
