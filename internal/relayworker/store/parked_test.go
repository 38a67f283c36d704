package store_test

import (
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// ReleaseParked releases a RETRY row only under the owner token of the mark that
// parked it: not the same row claimed again since, not another worker's RETRY row
// with the same code, not a mismatched id/token list.
func TestReleaseParkedTouchesOnlyTheMarksItNames(t *testing.T) {
	_, db := relaytest.NewDB(t)
	s, err := store.New(ctx, db, store.Options{Table: relaytest.DefaultTable})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	relaytest.Insert(t, db, relaytest.Many("p", "t", 3)...) // p-0 parked, p-1 someone else's, p-2 reclaimed
	if _, err := s.Claim(ctx, "mine/1", 10, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	fail := func(id string) store.Failure {
		return store.Failure{EventID: id, Code: "NOT_ENOUGH_REPLICAS", Message: "refused", Delay: time.Hour}
	}
	if _, n, err := s.MarkRetry(ctx, "mine/1", 5, []store.Failure{fail("p-0"), fail("p-1"), fail("p-2")}); err != nil || n != 3 {
		t.Fatalf("mark retry: %d %v", n, err)
	}
	if _, err := db.Exec(`UPDATE outbox_event SET owner_token = 'other/1' WHERE event_id = 'p-1'`); err != nil {
		t.Fatal(err)
	}
	// p-2 is claimed again (its backoff cut short by hand) and backed off once more
	// under the new batch's token.
	if _, err := db.Exec(`UPDATE outbox_event SET next_retry_at = now() WHERE event_id = 'p-2'`); err != nil {
		t.Fatal(err)
	}
	if rows, err := s.Claim(ctx, "mine/2", 10, 30*time.Second); err != nil || len(rows) != 1 {
		t.Fatalf("reclaim: %d %v", len(rows), err)
	}
	if _, _, err := s.MarkRetry(ctx, "mine/2", 5, []store.Failure{fail("p-2")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReleaseParked(ctx, []string{"p-0"}, nil); err == nil {
		t.Fatal("ids without tokens accepted")
	}
	n, err := s.ReleaseParked(ctx, []string{"p-0", "p-1", "p-2"}, []string{"mine/1", "mine/1", "mine/1"})
	if err != nil || n != 1 {
		t.Fatalf("released %d (%v), want 1 (p-0 only)", n, err)
	}
	rows, err := db.Query(`SELECT event_id, status, retry_count, next_retry_at <= now() FROM outbox_event ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := map[string]bool{"p-0": true, "p-1": false, "p-2": false}
	for rows.Next() {
		var id, st string
		var attempts int
		var due bool
		if err := rows.Scan(&id, &st, &attempts, &due); err != nil {
			t.Fatal(err)
		}
		if st != "RETRY" || due != want[id] {
			t.Errorf("%s: %s due %v, want RETRY due %v", id, st, due, want[id])
		}
		if id == "p-0" && attempts != 1 {
			t.Errorf("p-0 retry_count %d, want 1 (a released row keeps its counted attempt)", attempts)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// Waiting: PENDING, SENDING and due RETRY rows wait; RETRY rows backing off, SENT and
// DEAD rows do not.
func TestWaitingIgnoresRowsBackingOff(t *testing.T) {
	_, db := relaytest.NewDB(t)
	s, err := store.New(ctx, db, store.Options{Table: relaytest.DefaultTable})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	check := func(want bool, what string) {
		t.Helper()
		got, err := s.Waiting(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("%s: Waiting = %v, want %v", what, got, want)
		}
	}
	check(false, "empty table")
	relaytest.Insert(t, db, relaytest.Ev{ID: "w", AggID: "a", Version: 1, Topic: "t"})
	check(true, "a PENDING row")
	if _, err := s.Claim(ctx, "tok", 10, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	check(true, "a SENDING row")
	if _, _, err := s.MarkRetry(ctx, "tok", 5, []store.Failure{{EventID: "w", Code: "LEADER_CHANGE", Delay: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	check(false, "a RETRY row backing off")
	if _, err := db.Exec(`UPDATE outbox_event SET next_retry_at = now() - interval '1s'`); err != nil {
		t.Fatal(err)
	}
	check(true, "a due RETRY row")
	if _, err := db.Exec(`UPDATE outbox_event SET status = 'SENT'`); err != nil {
		t.Fatal(err)
	}
	check(false, "only SENT rows")
}
