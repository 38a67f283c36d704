package shardstore

import (
	"fmt"
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// holdStates reads event id -> state of the hold table.
func holdStates(t *testing.T, f *fixture) map[string]string {
	t.Helper()
	rows, err := f.db.Query(`SELECT event_id, state FROM ob_hold`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		out[id] = st
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func wantHolds(t *testing.T, f *fixture, want map[string]string) {
	t.Helper()
	got := holdStates(t, f)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("hold table %v, want %v", got, want)
	}
}

// A RETRY holds back the newer versions of its aggregate (those in its batch and those
// read later, flagged by the read) as HELD rows written with the advance; they are
// released in version order once it is sent. DEAD holds nothing back, also when a
// RETRY goes DEAD at its last attempt. Other aggregates flow on.
func TestHeldVersionsFollowTheirRetryInOrder(t *testing.T) {
	f := newFixture(t, 256)
	w := f.worker("w1")
	w.rebalance()
	failing := map[string]Result{
		"x1": {Outcome: Failed, Code: "BROKER_UNAVAILABLE", Message: "down"}, // RETRY, then sent
		"z1": {Outcome: Rejected, Code: "MESSAGE_TOO_LARGE", Message: "big"}, // DEAD at once
		"d1": {Outcome: Failed, Code: "SEND_FAILED", Message: "no"},          // RETRY, DEAD at the 3rd attempt
	}
	w.fail = func(e Event) Result {
		if r, ok := failing[e.EventID]; ok {
			return r
		}
		return Result{Outcome: Sent}
	}
	for v := 1; v <= 3; v++ {
		f.insert(f.db, fmt.Sprintf("x%d", v), "x", v)
		f.insert(f.db, fmt.Sprintf("y%d", v), "y", v)
		f.insert(f.db, fmt.Sprintf("z%d", v), "z", v)
		f.insert(f.db, fmt.Sprintf("d%d", v), "d", v)
	}
	w.drain(100)
	wantHolds(t, f, map[string]string{"x1": "RETRY", "x2": "HELD", "x3": "HELD", "z1": "DEAD", "d1": "RETRY", "d2": "HELD", "d3": "HELD"})

	// A newer version read later is flagged by the read and held too.
	f.insert(f.db, "x4", "x", 4)
	f.insert(f.db, "z4", "z", 4) // behind a DEAD only: published
	before := len(w.published)
	w.drain(100)
	if got := ids(w.published[before:]); fmt.Sprint(got) != "[z4]" {
		t.Fatalf("second window published %v, want [z4]", got)
	}
	wantHolds(t, f, map[string]string{"x1": "RETRY", "x2": "HELD", "x3": "HELD", "x4": "HELD", "z1": "DEAD", "d1": "RETRY", "d2": "HELD", "d3": "HELD"})

	// Due now: only the RETRY rows (the HELD ones wait behind them). x1 is sent,
	// d1 fails again.
	delete(failing, "x1")
	before = len(w.published)
	if n := w.holds(); n != 2 {
		t.Fatalf("%d due hold rows, want x1 and d1", n)
	}
	if got := ids(w.published[before:]); fmt.Sprint(got) != "[x1]" {
		t.Fatalf("published %v, want [x1]", got)
	}
	// x2..x4 are due now, in version order; d1 (2 attempts) is due again.
	before = len(w.published)
	if n := w.holds(); n != 4 {
		t.Fatalf("%d due hold rows, want d1, x2, x3, x4", n)
	}
	if got := ids(w.published[before:]); fmt.Sprint(got) != "[x2 x3 x4]" {
		t.Fatalf("published %v, want [x2 x3 x4]", got)
	}
	wantHolds(t, f, map[string]string{"z1": "DEAD", "d1": "DEAD", "d2": "HELD", "d3": "HELD"})
	var code string
	if err := f.db.QueryRow(`SELECT last_error_code FROM ob_hold WHERE event_id = 'd1'`).Scan(&code); err != nil || code != CodeMaxAttempts {
		t.Fatalf("d1's code %q (%v), want %s", code, err, CodeMaxAttempts)
	}
	// d1 went DEAD: d2 and d3 are due and go out in order.
	before = len(w.published)
	w.holds()
	if got := ids(w.published[before:]); fmt.Sprint(got) != "[d2 d3]" {
		t.Fatalf("published %v, want [d2 d3]", got)
	}
	wantHolds(t, f, map[string]string{"z1": "DEAD", "d1": "DEAD"})
	f.checkDelivery(w.published, "z1", "d1")
}

// Hold rows are settled only under the token that holds their shard: a worker whose
// lease was taken over settles nothing, and the due read of another token's shards
// returns nothing.
func TestSettleIsFencedByTheShardLease(t *testing.T) {
	f := newFixture(t, 16)
	a, b := f.worker("a"), f.worker("b")
	a.rebalance()
	a.fail = func(Event) Result { return Result{Outcome: Failed, Code: "C", Message: "m"} }
	f.insert(f.db, "e1", "k", 1)
	a.drain(10)
	rows, err := a.st.DueHolds(ctx, a.leases.Tokens(), 10)
	if err != nil || len(rows) != 1 || rows[0].State != schema.StatusRetry || rows[0].Attempts != 1 {
		t.Fatalf("due rows %+v, %v", rows, err)
	}
	if other, err := b.st.DueHolds(ctx, []string{"b/none"}, 10); err != nil || len(other) != 0 {
		t.Fatalf("due rows of a token without shards: %+v, %v", other, err)
	}
	// a stalls: its leases run out, its heartbeat goes stale, and b takes every shard.
	if _, err := f.db.Exec(`UPDATE ob_token SET lease_until = now() - interval '1 second';
UPDATE ob_workers SET heartbeat_at = now() - interval '1 hour' WHERE worker_id = 'a'`); err != nil {
		t.Fatal(err)
	}
	b.rebalance()
	s, _ := Transition(rows[0], Result{Outcome: Sent}, 3)
	if n, err := a.st.Settle(ctx, []Settlement{s}); err != nil || n != 0 {
		t.Fatalf("settle under a lost lease changed %d rows (%v), want 0", n, err)
	}
	wantHolds(t, f, map[string]string{"e1": "RETRY"})
	if n := b.holds(); n != 1 {
		t.Fatalf("the new owner sees %d due rows, want 1", n)
	}
	wantHolds(t, f, map[string]string{})
	f.checkDelivery(append(a.published, b.published...))
}
