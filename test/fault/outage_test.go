package fault

import (
	"fmt"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// A two-minute broker outage with --max-attempts 3 kills nothing: the workers pause
// (attempts are the rows' budget for their own failures, not the brokers'), and once
// the broker is back the backlog is SENT within seconds, in per-aggregate order.
func TestLongBrokerOutageLeavesNothingDead(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := newTopic(t, "longoutage")
	var evs []relaytest.Ev
	for i := 0; i < 400; i++ { // 40 aggregates x 10 versions
		evs = append(evs, relaytest.Ev{ID: fmt.Sprintf("lo-%d", i), AggID: fmt.Sprintf("agg-%d", i%40), Version: int64(i/40 + 1), Topic: tp})
	}
	relaytest.Insert(t, db, evs...)
	if err := broker.Unplug(); err != nil {
		t.Fatal(err)
	}
	ws := []*worker{
		startWorker(t, "long-1", dsn, "--max-attempts=3"),
		startWorker(t, "long-2", dsn, "--max-attempts=3"),
	}
	hold(t, 2*time.Minute, func(elapsed time.Duration) {
		if dead := mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE status = 'DEAD'`); dead != 0 {
			t.Fatalf("%d rows DEAD %s into the outage", dead, elapsed.Round(time.Second))
		}
	})
	for _, w := range ws {
		if up := w.metric("outbox_broker_up"); up != 0 {
			t.Fatalf("%s: outbox_broker_up = %v during the outage", w.name, up)
		}
	}
	if err := broker.Replug(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	relaytest.Eventually(t, 15*time.Second, "backlog SENT soon after the broker's return", func() bool {
		return mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE status <> 'SENT'`) == 0
	})
	d := verifyDelivery(t, db, tp)
	checkSurvived(t, 60, ws...)
	t.Logf("400 events SENT %s after a 2m outage, %d records (%d duplicates), pauses %v and %v",
		time.Since(back).Round(time.Millisecond), d.records, d.duplicates,
		ws[0].metric("outbox_broker_pauses_total"), ws[1].metric("outbox_broker_pauses_total"))
	for _, w := range ws {
		w.Stop(t)
	}
}

// A flapping broker (down 5 s of every 8 for a minute) with 3 workers, 3,000 events
// waiting and 100 more committed every second, 100 aggregates with many versions each: 10 s after the last return nothing is
// left PENDING, SENDING or RETRY (no row waits out a backoff the outage caused), nothing
// is DEAD, and every event is in Kafka in per-aggregate order.
var flapFor = time.Minute

func TestFlappingBrokerLeavesNothingBehind(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := newTopic(t, "flapping")
	const aggs = 100
	versions := make([]int64, aggs)
	seq := 0
	insert := func(n int) { // the next version of the next n aggregates, round robin
		var evs []relaytest.Ev
		for i := 0; i < n; i++ {
			a := seq % aggs
			versions[a]++
			evs = append(evs, relaytest.Ev{ID: fmt.Sprintf("fl-%d", seq), AggID: fmt.Sprintf("fl-agg-%d", a), Version: versions[a], Topic: tp})
			seq++
		}
		relaytest.Insert(t, db, evs...)
	}
	insert(3000) // 30 versions per aggregate waiting before the first outage
	var ws []*worker
	for i := 1; i <= 3; i++ {
		ws = append(ws, startWorker(t, fmt.Sprintf("flap-%d", i), dsn, "--batch-size=100", "--max-attempts=3"))
	}
	start := time.Now()
	for time.Since(start) < flapFor { // 5 s down, 3 s up; 50 events committed every 500 ms throughout
		if err := broker.Unplug(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10; i++ {
			insert(50)
			time.Sleep(500 * time.Millisecond)
		}
		if err := broker.Replug(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 6; i++ {
			insert(50)
			time.Sleep(500 * time.Millisecond)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			rows, err := db.Query(`SELECT status, retry_count, coalesce(last_error_code, ''), count(*),
				round(max(EXTRACT(EPOCH FROM next_retry_at - now()))::numeric, 1)
				FROM public.outbox_event WHERE status <> 'SENT' GROUP BY 1, 2, 3 ORDER BY 4 DESC LIMIT 20`)
			if err != nil {
				t.Logf("rows left: %v", err)
				return
			}
			defer rows.Close()
			for rows.Next() {
				var st, code string
				var rc, n int
				var wait float64
				if err := rows.Scan(&st, &rc, &code, &n, &wait); err != nil {
					t.Logf("rows left: %v", err)
					return
				}
				t.Logf("left: %s retry_count=%d code=%s rows=%d next_retry_in=%.1fs", st, rc, code, n, wait)
			}
			if err := rows.Err(); err != nil {
				t.Logf("rows left: %v", err)
			}
		}
	})
	relaytest.Eventually(t, 10*time.Second, "nothing non-terminal 10s after the last return", func() bool {
		return mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE status IN ('PENDING', 'SENDING', 'RETRY')`) == 0
	})
	if dead := mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE status = 'DEAD'`); dead != 0 {
		t.Fatalf("%d rows DEAD after a flapping broker", dead)
	}
	d := verifyDelivery(t, db, tp)
	checkSurvived(t, 200, ws...)
	t.Logf("%d events, %d records (%d duplicates)", d.events, d.records, d.duplicates)
	for _, w := range ws {
		w.Stop(t)
	}
}
