package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/inbox"
)

// TestGapIsReportedOrWaitedFor: version 3 after version 1 is applied with outcome Gap
// by default; with WaitForGaps it is retried and then parked with code version_gap.
func TestGapIsReportedOrWaitedFor(t *testing.T) {
	for _, wait := range []bool{false, true} {
		t.Run(fmt.Sprintf("WaitForGaps=%v", wait), func(t *testing.T) {
			db, s := setup(t)
			b := topicWith(t, 1, event{"v1", "u1", 1, `{}`}.kafka(""), event{"v3", "u1", 3, `{}`}.kafka(""))
			tl := newTally(2)
			o := fastOptions(tl)
			o.WaitForGaps = wait
			o.Metrics = inbox.NewMetrics()
			var calls atomic.Int32
			c, err := inbox.NewConsumer(s, addPoints(&calls), o)
			if err != nil {
				t.Fatal(err)
			}
			r := reader(b, "points")
			defer r.Close()
			runUntil(t, c, r, tl)
			gaps := value(t, o.Metrics.Counter("inbox_version_gap_total", "points", "payments", "PaymentSucceeded"))
			parked := parkedRows(t, db, "points")
			if !wait && (tl.get(inbox.Gap) != 1 || gaps != 1 || len(parked) != 0 || total(t, db, "u1") != 20) {
				t.Fatalf("outcomes %v, gap metric %v, parked %v, total %d", tl.by, gaps, parked, total(t, db, "u1"))
			}
			if wait && (tl.get(inbox.Parked) != 1 || parked["v3"] != inbox.CodeVersionGap || total(t, db, "u1") != 10) {
				t.Fatalf("outcomes %v, parked %v, total %d", tl.by, parked, total(t, db, "u1"))
			}
		})
	}
}

// TestHoldAggregateOnPark: with the option, the versions after a parked one are
// parked as "predecessor_parked" and another aggregate flows; without it they flow.
func TestHoldAggregateOnPark(t *testing.T) {
	for _, hold := range []bool{false, true} {
		t.Run(fmt.Sprintf("hold=%v", hold), func(t *testing.T) {
			db, s := setup(t)
			b := topicWith(t, 1,
				event{"a1", "u1", 1, `{}`}.kafka(""), event{"a2", "u1", 2, `{}`}.kafka(""),
				event{"b1", "u2", 1, `{}`}.kafka(""), event{"a3", "u1", 3, `{}`}.kafka(""))
			var calls atomic.Int32
			fn := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
				if m.EventID == "a1" {
					return "", inbox.Permanent(errors.New("rejected"))
				}
				return addPoints(&calls)(ctx, tx, m)
			}
			tl := newTally(4)
			o := fastOptions(tl)
			o.HoldAggregateOnPark = hold
			c, err := inbox.NewConsumer(s, fn, o)
			if err != nil {
				t.Fatal(err)
			}
			r := reader(b, "points")
			defer r.Close()
			runUntil(t, c, r, tl)
			parked := parkedRows(t, db, "points")
			want := map[string]string{"a1": inbox.CodePermanent}
			if hold {
				want["a2"], want["a3"] = inbox.CodePredecessorParked, inbox.CodePredecessorParked
			}
			if fmt.Sprint(parked) != fmt.Sprint(want) || total(t, db, "u2") != 10 {
				t.Fatalf("parked %v, want %v (u2 total %d)", parked, want, total(t, db, "u2"))
			}
		})
	}
}

// TestBatchModeKeepsPartitionOrderAndSurvivesAFailure: 3,000 messages over 6
// partitions and 60 aggregates, 10% redelivered, one poison in the middle, consumed
// 100 per transaction: every aggregate's versions are applied in order, each once,
// the duplicates are absorbed, the poison is parked, and nothing is left uncommitted.
func TestBatchModeKeepsPartitionOrderAndSurvivesAFailure(t *testing.T) {
	db, s := setup(t)
	var msgs []kafka.Message
	version := map[string]int64{}
	for i := 0; i < 3000; i++ {
		agg := fmt.Sprintf("u%d", i%60)
		version[agg]++
		e := event{fmt.Sprintf("e%d", i), agg, version[agg], `{}`}
		msgs = append(msgs, e.kafka(""))
		if i%10 == 3 {
			msgs = append(msgs, e.kafka("")) // redelivered right away
		}
	}
	b := topicWith(t, 6, msgs...)
	var calls atomic.Int32
	fn := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		if m.EventID == "e1500" {
			return "", inbox.Permanent(errors.New("cannot decode"))
		}
		return addPoints(&calls)(ctx, tx, m)
	}
	tl := newTally(len(msgs))
	o := fastOptions(tl)
	o.BatchSize = 100
	c, err := inbox.NewConsumer(s, fn, o)
	if err != nil {
		t.Fatal(err)
	}
	r := reader(b, "points")
	commits0 := commits(t, db)
	runUntil(t, c, r, tl)
	r.Close()
	// One transaction per batch, and one per parked message and per rerun of the
	// poison's batch: far fewer than one per message. Statistics arrive within a
	// second or so of the commits.
	var n int64
	for deadline := time.Now().Add(5 * time.Second); n < 30 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		n = commits(t, db) - commits0 // at least one per batch of 100 once the statistics are in
	}
	if n < 30 || n > 1000 {
		t.Errorf("%d transactions for %d messages: want one per batch (30 to 1000)", n, len(msgs))
	}
	if tl.get(inbox.Duplicate) != 300 || tl.get(inbox.Parked) != 1 || tl.get(inbox.Stale) != 0 {
		t.Fatalf("outcomes %v; want 300 duplicates, 1 parked, no stale", tl.by)
	}
	for agg, vs := range tl.order {
		if !slices.IsSorted(vs) || len(slices.Compact(slices.Clone(vs))) != len(vs) {
			t.Fatalf("aggregate %s applied out of order or twice: %v", agg, vs)
		}
	}
	var sum int
	if err := db.QueryRow(`SELECT sum(total) FROM points`).Scan(&sum); err != nil || sum != 2999*10 {
		t.Fatalf("sum of totals %d (%v), want %d", sum, err, 2999*10)
	}
	nothingLeft(t, b, "points")
}

// commits is the database's committed transaction count as the statistics system
// has it now (it lags the commits by up to a second).
func commits(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(`SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
