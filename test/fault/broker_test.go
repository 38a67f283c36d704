package fault

import (
	"strings"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relayproc"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// The broker goes off the network mid-stream (its port refuses connections, open
// connections are cut) while two workers relay and the application keeps committing;
// then it comes back on the same address. The broker keeps its data, as a real Kafka
// broker with durable logs does across a restart or a partition, so every committed
// event - before, during and after the outage - must be in Kafka afterwards. (The
// in-memory hack/devbroker would lose everything it stored when killed; a test built
// on killing it could only assert on events committed after its restart.)
func TestBrokerOutageMidStream(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := newTopic(t, "brokeroutage")
	const batch = 50
	ws := []*worker{
		startWorker(t, "outage-1", dsn, "--lease=2s", "--batch-size=50"),
		startWorker(t, "outage-2", dsn, "--lease=2s", "--batch-size=50"),
	}
	for _, w := range ws {
		w.waitReady(t)
	}
	prod := startProducer(t, db, tp, 12)
	status := func(s string) int {
		return mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE status = $1`, s)
	}
	relaytest.Eventually(t, 30*time.Second, "200 events relayed before the outage", func() bool { return status("SENT") >= 200 })

	if err := broker.Unplug(); err != nil {
		t.Fatal(err)
	}
	unplugged := time.Now()
	atUnplug := prod.committed.Load()
	relaytest.Eventually(t, 30*time.Second, "both workers paused for the broker", func() bool {
		for _, w := range ws {
			if w.metric("outbox_broker_up") != 0 {
				return false
			}
		}
		return true
	})
	for _, w := range ws {
		if c, body := relayproc.HTTPGet(w.readyURL); c != 503 || !strings.Contains(body, "broker unavailable") {
			t.Fatalf("%s /readyz %d %q during the outage, want 503 broker unavailable", w.name, c, body)
		}
	}
	relaytest.Eventually(t, 30*time.Second, "500 events committed during the outage", func() bool {
		return prod.committed.Load() >= atUnplug+500
	})
	// Only a batch caught half-written by the unplug can have had an attempt counted.
	counted := mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE retry_count > 0`)
	if max := len(ws) * 2 * batch; counted > max {
		t.Fatalf("%d rows had attempts counted during a broker outage, more than %d", counted, max)
	}
	retrying := status("RETRY")
	var codes string
	if err := db.QueryRow(`SELECT coalesce(string_agg(DISTINCT last_error_code, ','), '') FROM public.outbox_event WHERE status = 'RETRY'`).Scan(&codes); err != nil {
		t.Fatal(err)
	}
	if err := broker.Replug(); err != nil {
		t.Fatal(err)
	}
	outage := time.Since(unplugged)
	replugged := time.Now()
	dbReplug := dbNow(t, db)
	relaytest.Eventually(t, 30*time.Second, "everything committed before the broker came back SENT", func() bool {
		return mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE status <> 'SENT' AND created_at <= $1`, dbReplug) == 0
	})
	caughtUp := time.Since(replugged)
	atReplug := prod.committed.Load()
	relaytest.Eventually(t, 30*time.Second, "200 more events committed after the outage", func() bool {
		return prod.committed.Load() >= atReplug+200
	})
	prod.Stop(t)
	relaytest.Eventually(t, 30*time.Second, "every row SENT", func() bool {
		return mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE status <> 'SENT'`) == 0
	})

	if dead := status("DEAD"); dead != 0 {
		t.Fatalf("%d rows DEAD after a broker outage", dead)
	}
	// Backoff 100ms..1s: a few lines per second of outage per worker, not thousands.
	checkSurvived(t, 10+int(outage/time.Second)*4, ws...)
	d := verifyDelivery(t, db, tp)
	t.Logf("events %d, records %d, duplicates %d; outage %s with %d rows in RETRY (%s) and %d with a counted attempt at its end; "+
		"backlog SENT %s after the broker came back", d.events, d.records, d.duplicates, outage.Round(time.Millisecond),
		retrying, codes, counted, caughtUp.Round(time.Millisecond))
	if max := len(ws) * 3 * batch; d.duplicates > max {
		t.Errorf("%d duplicates, more than %d (3 batches per worker)", d.duplicates, max)
	}
	for _, w := range ws {
		w.Stop(t)
	}
}
