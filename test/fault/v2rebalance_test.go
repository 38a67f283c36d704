package fault

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// The shards of a v2 table move across 1 -> 3 -> 2 -> 1 worker processes while a
// producer commits throughout: one worker holds all 16, two more join and each gets a
// share (released by the first at window boundaries), then one stops gracefully (its
// shards are free at once, mid-window or not) and one is SIGKILLed (its shards wait
// for its lease to run out). Every committed event reaches Kafka, each aggregate in
// order; only the killed worker's last batches may repeat.
func TestV2ShardsRebalance1To3To2Workers(t *testing.T) {
	const shards, batch, lease = 16, 50, 3 * time.Second
	dsn, db := v2Table(t, "16")
	tp := newTopic(t, "v2rebal")
	flags := []string{"--lease=" + lease.String(), fmt.Sprintf("--batch-size=%d", batch)}
	w1 := startWorker(t, "v2rebal-1", dsn, flags...)
	w1.waitReady(t)
	prod := startProducer(t, db, tp, 24)
	relaytest.Eventually(t, 20*time.Second, "one worker holding every shard, 150 events relayed", func() bool {
		return owners(t, db)["v2rebal-1"] == shards && broker.Count(tp) >= 150
	})

	w2, w3 := startWorker(t, "v2rebal-2", dsn, flags...), startWorker(t, "v2rebal-3", dsn, flags...)
	joined := time.Now()
	var shares map[string]int
	relaytest.Eventually(t, 4*lease, "three workers sharing the shards", func() bool {
		shares = owners(t, db)
		return len(shares) == 3 && shares["v2rebal-1"]+shares["v2rebal-2"]+shares["v2rebal-3"] == shards &&
			shares["v2rebal-1"] <= 6 && shares["v2rebal-2"] > 0 && shares["v2rebal-3"] > 0
	})
	t.Logf("three workers share the shards %v %s after two joined", shares, time.Since(joined).Round(10*time.Millisecond))
	at := broker.Count(tp)
	relaytest.Eventually(t, 20*time.Second, "150 more events relayed by three workers", func() bool { return broker.Count(tp) >= at+150 })

	w2.Stop(t)
	stopped := time.Now()
	relaytest.Eventually(t, 4*lease, "the stopped worker's shards taken", func() bool {
		o := owners(t, db)
		return o["v2rebal-2"] == 0 && o["v2rebal-1"]+o["v2rebal-3"] == shards
	})
	t.Logf("the gracefully stopped worker's shards taken %s after its exit", time.Since(stopped).Round(10*time.Millisecond))
	at = broker.Count(tp)
	relaytest.Eventually(t, 20*time.Second, "150 more events relayed by two workers", func() bool { return broker.Count(tp) >= at+150 })

	if err := w3.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	relaytest.Eventually(t, 4*lease, "the survivor holding every shard", func() bool { return owners(t, db)["v2rebal-1"] == shards })
	took := time.Since(killed)
	t.Logf("the survivor took every shard %s after the kill (lease %s)", took.Round(10*time.Millisecond), lease)
	at = broker.Count(tp)
	relaytest.Eventually(t, 20*time.Second, "150 more events relayed by the survivor", func() bool { return broker.Count(tp) >= at+150 })
	prod.Stop(t)

	d := verifyV2(t, db, tp, 30*time.Second)
	t.Logf("%d events, %d records, %d duplicates", d.events, d.records, d.duplicates)
	// The killed worker's batch published and not advanced, and one read ahead.
	if d.duplicates > 2*batch {
		t.Errorf("%d duplicates, more than the killed worker's 2 batches (%d)", d.duplicates, 2*batch)
	}
	if n := mustCount(t, db, `SELECT count(*) FROM public.outbox_event_hold`); n != 0 {
		t.Fatalf("%d hold rows after the drain", n)
	}
	checkSurvived(t, 3, w1)
	w1.Stop(t)
}
