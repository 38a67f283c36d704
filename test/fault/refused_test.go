package fault

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/kafkatest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// refusedFor is how long TestEveryProduceRefused's broker refuses every write: the
// issue's two minutes by default; FAULT_REFUSED_FOR (a Go duration) shortens it for a
// quick local run.
func refusedFor(t *testing.T) time.Duration {
	v := os.Getenv("FAULT_REFUSED_FOR")
	if v == "" {
		return 2 * time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("FAULT_REFUSED_FOR=%q: want a positive Go duration", v)
	}
	return d
}

// The most common Kafka maintenance failure: the brokers answer metadata with a
// leader for every partition but refuse every write, first NOT_ENOUGH_REPLICAS (acks=all
// while a broker is out of the ISR), then REQUEST_TIMED_OUT, for refusedFor. 200 events
// wait and 100 more are committed meanwhile; two worker processes run with the
// settings a user reported losing the backlog with (--max-attempts 3 --min-backoff
// 200ms --max-backoff 5s). Throughout: nothing DEAD, no attempt counted, both workers
// paused and saying why. After the return: every event SENT within seconds, each
// once, in per-aggregate order.
func TestEveryProduceRefused(t *testing.T) {
	window := refusedFor(t)
	dsn, db := relaytest.NewDB(t)
	tp := newTopic(t, "refused")
	refusal := broker.RefuseProduce(kafkatest.ErrNotEnoughReplicas, tp)
	t.Cleanup(refusal.Stop)
	const aggs = 20
	var evs []relaytest.Ev
	for i := range 300 { // 20 aggregates x 15 versions: 10 versions wait, 5 come during the refusal
		evs = append(evs, relaytest.Ev{ID: fmt.Sprintf("rf-%d", i), AggID: fmt.Sprintf("rf-agg-%d", i%aggs), Version: int64(i/aggs + 1), Topic: tp})
	}
	relaytest.Insert(t, db, evs[:200]...)
	flags := []string{"--max-attempts=3", "--min-backoff=200ms", "--max-backoff=5s", "--batch-size=50"}
	ws := []*worker{startWorker(t, "refused-1", dsn, flags...), startWorker(t, "refused-2", dsn, flags...)}

	start := time.Now()
	untouched := func() {
		t.Helper()
		if n := mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE status = 'DEAD' OR retry_count > 0`); n != 0 {
			t.Fatalf("%d rows DEAD or with an attempt counted %s into the refusal", n, time.Since(start).Round(time.Second))
		}
	}
	relaytest.Eventually(t, 30*time.Second, "both workers paused", func() bool {
		untouched()
		for _, w := range ws {
			if w.metric("outbox_broker_pauses_total") < 1 || w.metric("outbox_broker_up") != 0 {
				return false
			}
		}
		return true
	})
	for _, w := range ws {
		// The pause's metrics move before its log line is written (setBroker, then the
		// line), so a loaded machine can see the one without the other for a moment.
		relaytest.Eventually(t, 5*time.Second, w.name+" saying every produce was refused with NOT_ENOUGH_REPLICAS", func() bool {
			return strings.Contains(w.Stderr(), `"cause":"produce-refused","code":"NOT_ENOUGH_REPLICAS"`)
		})
	}
	inserted, switched := false, false
	hold(t, window, func(elapsed time.Duration) {
		untouched()
		if !inserted && elapsed >= window/4 {
			relaytest.Insert(t, db, evs[200:]...)
			inserted = true
		}
		if !switched && elapsed >= window/2 {
			refusal.SetCode(kafkatest.ErrRequestTimedOut)
			switched = true
		}
	})
	for _, w := range ws {
		if up := w.metric("outbox_broker_up"); up != 0 {
			t.Fatalf("%s: outbox_broker_up = %v while every produce is refused", w.name, up)
		}
	}
	refused := refusal.Refused()
	refusal.Stop()
	back := time.Now()
	relaytest.Eventually(t, 15*time.Second, "every event SENT soon after the brokers accept writes", func() bool {
		return mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE status <> 'SENT'`) == 0
	})
	caughtUp := time.Since(back)
	if caughtUp > 10*time.Second {
		t.Errorf("backlog SENT %s after the return, want within seconds", caughtUp.Round(time.Millisecond))
	}
	untouched()
	d := verifyDelivery(t, db, tp)
	if d.duplicates != 0 {
		t.Errorf("%d duplicates: nothing was stored while refused", d.duplicates)
	}
	checkSurvived(t, 20, ws...)
	t.Logf("%s of refused produces (%d requests, NOT_ENOUGH_REPLICAS then REQUEST_TIMED_OUT): %d events SENT %s after the return, pauses %v and %v",
		window, refused, d.events, caughtUp.Round(time.Millisecond),
		ws[0].metric("outbox_broker_pauses_total"), ws[1].metric("outbox_broker_pauses_total"))
	for _, w := range ws {
		w.Stop(t)
	}
}

// hold runs check every 250 ms until window has passed since hold was called: a fault
// that lasts a given time, with its invariant checked all along.
func hold(t *testing.T, window time.Duration, check func(elapsed time.Duration)) {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		elapsed := time.Since(start)
		check(elapsed)
		if elapsed >= window {
			return
		}
	}
}
