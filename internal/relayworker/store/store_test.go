package store_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

func TestMain(m *testing.M) { relaytest.Main(m) }

var ctx = context.Background()

func newStore(t *testing.T) (*store.Store, func(...relaytest.Ev)) {
	_, db := relaytest.NewDB(t)
	s, err := store.New(ctx, db, store.Options{Table: relaytest.DefaultTable})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, func(evs ...relaytest.Ev) { relaytest.Insert(t, db, evs...) }
}

func ids(rows []event.Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.EventID)
	}
	sort.Strings(out)
	return out
}

func TestClaimSetsLeaseOnDatabaseClockAndFencesMarks(t *testing.T) {
	_, db := relaytest.NewDB(t)
	s, err := store.New(ctx, db, store.Options{Table: relaytest.DefaultTable})
	if err != nil {
		t.Fatal(err)
	}
	relaytest.Insert(t, db, relaytest.Many("e", "t", 3)...)
	rows, err := s.Claim(ctx, "tokA", 10, 30*time.Second)
	if err != nil || len(rows) != 3 {
		t.Fatalf("claim: %v %d", err, len(rows))
	}
	// Pitfall "DB-clock leases": the lease is now()+lease on the server clock, whatever
	// the worker's clock says (the worker never sends a timestamp).
	var skew float64
	if err := db.QueryRow(`SELECT max(abs(EXTRACT(EPOCH FROM lease_until - now()) - 30)) FROM outbox_event WHERE owner_token='tokA'`).Scan(&skew); err != nil {
		t.Fatal(err)
	}
	if skew > 2 {
		t.Fatalf("lease_until is not now()+30s on the database clock (off by %.1fs)", skew)
	}
	// Nothing more is claimable while the lease runs.
	if again, _ := s.Claim(ctx, "tokB", 10, 30*time.Second); len(again) != 0 {
		t.Fatalf("claimed leased rows again: %v", ids(again))
	}
	// Expire the lease (as if 31s passed on the DB clock) and take it over.
	if _, err := db.Exec(`UPDATE outbox_event SET lease_until = now() - interval '1s', next_retry_at = now() - interval '1s'`); err != nil {
		t.Fatal(err)
	}
	taken, err := s.Claim(ctx, "tokB", 10, 30*time.Second)
	if err != nil || len(taken) != 3 {
		t.Fatalf("take over: %v %d", err, len(taken))
	}
	for _, r := range taken {
		if !r.Expired {
			t.Fatalf("row %s not reported as an expired-lease take-over", r.EventID)
		}
	}
	// Zombie fencing: the old owner's late writes change nothing.
	sent := []store.Sent{{EventID: "e-0", Partition: 1, Offset: 7}}
	if n, err := s.MarkSent(ctx, "tokA", sent); err != nil || n != 0 {
		t.Fatalf("stale owner MarkSent changed %d rows (err %v)", n, err)
	}
	if _, n, err := s.MarkRetry(ctx, "tokA", 5, []store.Failure{{EventID: "e-1", Code: "X", Delay: time.Second}}); err != nil || n != 0 {
		t.Fatalf("stale owner MarkRetry changed %d rows (err %v)", n, err)
	}
	if n, err := s.MarkDead(ctx, "tokA", []store.Failure{{EventID: "e-2", Code: "X"}}); err != nil || n != 0 {
		t.Fatalf("stale owner MarkDead changed %d rows (err %v)", n, err)
	}
	if n, err := s.Release(ctx, "tokA", []string{"e-0", "e-1", "e-2"}); err != nil || n != 0 {
		t.Fatalf("stale owner Release changed %d rows (err %v)", n, err)
	}
	// The new owner's marks work.
	if n, err := s.MarkSent(ctx, "tokB", sent); err != nil || n != 1 {
		t.Fatalf("owner MarkSent changed %d rows (err %v)", n, err)
	}
	var part, off int64
	if err := db.QueryRow(`SELECT broker_partition, broker_offset FROM outbox_event WHERE event_id='e-0' AND status='SENT' AND sent_at IS NOT NULL`).Scan(&part, &off); err != nil || part != 1 || off != 7 {
		t.Fatalf("sent row: %v %d %d", err, part, off)
	}
	// Sent again by the zombie: still nothing.
	if n, _ := s.MarkSent(ctx, "tokB", sent); n != 0 {
		t.Fatal("MarkSent on a SENT row changed it again")
	}
}

func TestRetryBackoffAndMaxAttempts(t *testing.T) {
	_, db := relaytest.NewDB(t)
	s, _ := store.New(ctx, db, store.Options{Table: relaytest.DefaultTable})
	relaytest.Insert(t, db, relaytest.Ev{ID: "r", AggID: "a", Version: 1, Topic: "t"})
	for attempt := 1; attempt <= 3; attempt++ {
		if _, err := db.Exec(`UPDATE outbox_event SET next_retry_at = now()`); err != nil {
			t.Fatal(err)
		}
		rows, err := s.Claim(ctx, "tok", 10, 30*time.Second)
		if err != nil || len(rows) != 1 || rows[0].RetryCount != attempt-1 {
			t.Fatalf("attempt %d claim: %v %+v", attempt, err, rows)
		}
		dead, n, err := s.MarkRetry(ctx, "tok", 3, []store.Failure{{EventID: "r", Code: "BROKER_UNAVAILABLE", Message: "down", Delay: 10 * time.Second}})
		if err != nil || n != 1 {
			t.Fatal(err, n)
		}
		var st, code, msg string
		var cnt int
		var delay float64
		if err := db.QueryRow(`SELECT status, last_error_code, last_error_message, retry_count, EXTRACT(EPOCH FROM next_retry_at - now()) FROM outbox_event`).Scan(&st, &code, &msg, &cnt, &delay); err != nil {
			t.Fatal(err)
		}
		if attempt < 3 {
			if st != "RETRY" || code != "BROKER_UNAVAILABLE" || cnt != attempt || delay < 8 || delay > 11 || len(dead) != 0 {
				t.Fatalf("attempt %d: %s %s %d %.1f %v", attempt, st, code, cnt, delay, dead)
			}
			// Not claimable before next_retry_at (no hot loop).
			if again, _ := s.Claim(ctx, "tok", 10, time.Minute); len(again) != 0 {
				t.Fatal("RETRY row claimable before next_retry_at")
			}
		} else if st != "DEAD" || code != store.CodeMaxAttempts || msg != "BROKER_UNAVAILABLE: down" || len(dead) != 1 {
			t.Fatalf("after max attempts: %s %s %q %v", st, code, msg, dead)
		}
	}
}

func TestAggregateOrderBlocksNewerVersions(t *testing.T) {
	_, db := relaytest.NewDB(t)
	s, _ := store.New(ctx, db, store.Options{Table: relaytest.DefaultTable})
	relaytest.Insert(t, db,
		relaytest.Ev{ID: "a1", AggID: "A", Version: 1, Topic: "t"},
		relaytest.Ev{ID: "a2", AggID: "A", Version: 2, Topic: "t"},
		relaytest.Ev{ID: "a3", AggID: "A", Version: 3, Topic: "t"},
		relaytest.Ev{ID: "b1", AggID: "B", Version: 1, Topic: "t"},
	)
	// Worker 1 claims only v1 of A (batch of 1); worker 2 must not get v2 while v1 is SENDING.
	if _, err := db.Exec(`UPDATE outbox_event SET next_retry_at = now() + interval '1h' WHERE event_id <> 'a1'`); err != nil {
		t.Fatal(err)
	}
	first, _ := s.Claim(ctx, "w1", 1, time.Minute)
	if got := ids(first); len(got) != 1 || got[0] != "a1" {
		t.Fatalf("w1 claimed %v", got)
	}
	if _, err := db.Exec(`UPDATE outbox_event SET next_retry_at = now() WHERE event_id <> 'a1'`); err != nil {
		t.Fatal(err)
	}
	second, _ := s.Claim(ctx, "w2", 10, time.Minute)
	if got := ids(second); len(got) != 1 || got[0] != "b1" {
		t.Fatalf("w2 claimed %v while a1 is SENDING; want only b1", got)
	}
	// a1 goes RETRY: a2 stays blocked until a1 is terminal.
	if _, _, err := s.MarkRetry(ctx, "w1", 10, []store.Failure{{EventID: "a1", Code: "X", Delay: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Claim(ctx, "w2", 10, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %v while a1 is RETRY", ids(got))
	}
	// a1 ready again: one claim takes the whole chain a1..a3 (published in order).
	if _, err := db.Exec(`UPDATE outbox_event SET next_retry_at = now() WHERE event_id = 'a1'`); err != nil {
		t.Fatal(err)
	}
	chain, _ := s.Claim(ctx, "w3", 10, time.Minute)
	if got := ids(chain); len(got) != 3 {
		t.Fatalf("chain claim got %v", got)
	}
	// a1 DEAD does not block: mark a1 dead, a2/a3 released, then claimable.
	if _, err := s.MarkDead(ctx, "w3", []store.Failure{{EventID: "a1", Code: "MESSAGE_TOO_LARGE"}}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Release(ctx, "w3", []string{"a2", "a3"}); n != 2 {
		t.Fatalf("release: %d", n)
	}
	after, _ := s.Claim(ctx, "w4", 10, time.Minute)
	if got := ids(after); len(got) != 2 || got[0] != "a2" {
		t.Fatalf("after DEAD a1: %v", got)
	}
}

// Racing claimers never both get v1 and v2 of one aggregate, and never the same row.
func TestConcurrentClaimsDisjointAndOrdered(t *testing.T) {
	_, db := relaytest.NewDB(t)
	s, _ := store.New(ctx, db, store.Options{Table: relaytest.DefaultTable})
	var evs []relaytest.Ev
	for a := 0; a < 50; a++ {
		for v := 1; v <= 4; v++ {
			evs = append(evs, relaytest.Ev{ID: "e" + itoa(a) + "-" + itoa(v), AggID: "agg" + itoa(a), Version: int64(v), Topic: "t"})
		}
	}
	relaytest.Insert(t, db, evs...)
	var mu sync.Mutex
	owner := map[string]string{}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			tok := "w" + itoa(w)
			for i := 0; i < 200; i++ {
				rows, err := s.Claim(ctx, tok, 7, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				// While we hold these rows, no other worker may hold another version of
				// the same aggregate.
				for _, r := range rows {
					if prev, ok := owner[r.EventID]; ok {
						t.Errorf("row %s claimed by %s and %s", r.EventID, prev, tok)
					}
					owner[r.EventID] = tok
				}
				mu.Unlock()
				var sent []store.Sent
				for _, r := range rows {
					sent = append(sent, store.Sent{EventID: r.EventID, Partition: -1, Offset: -1})
				}
				if _, err := s.MarkSent(ctx, tok, sent); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if len(owner) != len(evs) {
		t.Fatalf("claimed %d of %d", len(owner), len(evs))
	}
}

// A checker for concurrent in-flight aggregates, independent of the claimers: at no
// time does the table hold two SENDING versions of one aggregate under different owners.
func TestNoTwoOwnersPerAggregate(t *testing.T) {
	_, db := relaytest.NewDB(t)
	s, _ := store.New(ctx, db, store.Options{Table: relaytest.DefaultTable})
	var evs []relaytest.Ev
	for a := 0; a < 20; a++ {
		for v := 1; v <= 10; v++ {
			evs = append(evs, relaytest.Ev{ID: "e" + itoa(a) + "-" + itoa(v), AggID: "agg" + itoa(a), Version: int64(v), Topic: "t"})
		}
	}
	relaytest.Insert(t, db, evs...)
	stop := make(chan struct{})
	var bad int
	var checkWG sync.WaitGroup
	checkWG.Add(1)
	go func() {
		defer checkWG.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var n int
			_ = db.QueryRow(`SELECT count(*) FROM (SELECT aggregate_id FROM outbox_event WHERE status='SENDING' GROUP BY aggregate_id HAVING count(DISTINCT owner_token) > 1) x`).Scan(&n)
			bad += n
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(tok string) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				rows, _ := s.Claim(ctx, tok, 5, time.Minute)
				var sent []store.Sent
				for _, r := range rows {
					sent = append(sent, store.Sent{EventID: r.EventID, Partition: -1, Offset: -1})
				}
				_, _ = s.MarkSent(ctx, tok, sent)
			}
		}("w" + itoa(w))
	}
	wg.Wait()
	close(stop)
	checkWG.Wait()
	if bad > 0 {
		t.Fatalf("saw %d aggregates with versions owned by two workers at once", bad)
	}
	if c := relaytest.CountStatus(t, db); c["SENT"] != len(evs) {
		t.Fatalf("statuses %v", c)
	}
}

// Pitfall: claim by status + lease, never by "highest id/time seen". A transaction
// that started earlier (lower created_at) and commits late is still claimed.
func TestLateCommittingLowerCreatedAtIsClaimed(t *testing.T) {
	_, db := relaytest.NewDB(t)
	s, _ := store.New(ctx, db, store.Options{Table: relaytest.DefaultTable})
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload, created_at)
		VALUES ('early', 'o', 'x', 1, 't', 't', 'x', '{}', now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	relaytest.Insert(t, db, relaytest.Ev{ID: "late", AggID: "y", Version: 1, Topic: "t"})
	got, _ := s.Claim(ctx, "w", 10, time.Minute)
	if ids := ids(got); len(ids) != 1 || ids[0] != "late" {
		t.Fatalf("first claim %v", ids)
	}
	_, _ = s.MarkSent(ctx, "w", []store.Sent{{EventID: "late", Partition: -1, Offset: -1}})
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Claim(ctx, "w", 10, time.Minute)
	if ids := ids(got); len(ids) != 1 || ids[0] != "early" {
		t.Fatalf("late-committed older row not claimed: %v", ids)
	}
}

func TestBacklogAndRecovery(t *testing.T) {
	_, db := relaytest.NewDB(t)
	s, _ := store.New(ctx, db, store.Options{Table: relaytest.DefaultTable})
	relaytest.Insert(t, db, relaytest.Many("e", "t", 4)...)
	n, age, err := s.Backlog(ctx)
	if err != nil || n != 4 || age < 0 {
		t.Fatal(n, age, err)
	}
	rec, err := store.InRecovery(ctx, db)
	if err != nil || rec {
		t.Fatalf("primary reported in recovery: %v %v", rec, err)
	}
}

func itoa(i int) string {
	const d = "0123456789"
	if i < 10 {
		return d[i : i+1]
	}
	return itoa(i/10) + d[i%10:i%10+1]
}

// Status updates leave dead tuples behind; Health reports them (and the table size)
// from the statistics views, so bloat that slows claims shows up in the metrics.
func TestHealthReportsDeadTuplesAndSize(t *testing.T) {
	s, insert := newStore(t)
	insert(relaytest.Many("h", "t", 200)...)
	rows, err := s.Claim(ctx, "tok", 200, 30*time.Second)
	if err != nil || len(rows) != 200 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	relaytest.Eventually(t, 15*time.Second, "dead tuples counted after the claim's updates", func() bool {
		h, err := s.Health(ctx)
		return err == nil && h.DeadTuples >= 200 && h.SizeBytes > 0
	})
}

// A released older version sorts behind the newer versions of its aggregate that kept
// their insert time (next_retry_at = now() on release). The claim must still reach
// it: a batch filled with newer versions the order check drops would starve every
// aggregate (seen with a paused relay releasing whole batches).
func TestClaimReachesReleasedOlderVersionsBehindNewerOnes(t *testing.T) {
	_, db := relaytest.NewDB(t)
	var evs []relaytest.Ev
	for i := 0; i < 3000; i++ { // 100 aggregates x 30 versions, one transaction
		evs = append(evs, relaytest.Ev{ID: fmt.Sprintf("rr-%d", i), AggID: fmt.Sprintf("rr-agg-%d", i%100), Version: int64(i/100 + 1), Topic: "t"})
	}
	relaytest.Insert(t, db, evs...)
	s, err := store.New(context.Background(), db, store.Options{Table: relaytest.DefaultTable})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := s.Claim(ctx, "a", 100, 30*time.Second)
	if err != nil || len(first) != 100 {
		t.Fatalf("first claim: %d rows, %v", len(first), err)
	}
	ids := make([]string, len(first))
	for i, r := range first {
		ids[i] = r.EventID
	}
	if n, err := s.Release(ctx, "a", ids); err != nil || n != 100 {
		t.Fatalf("release: %d, %v", n, err)
	}
	again, err := s.Claim(ctx, "b", 100, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 100 {
		t.Fatalf("claim after release returned %d rows, want the 100 released version-1 rows", len(again))
	}
	for _, r := range again {
		if r.AggregateVersion != 1 {
			t.Fatalf("claimed %s version %d before its aggregate's version 1", r.EventID, r.AggregateVersion)
		}
	}
}
