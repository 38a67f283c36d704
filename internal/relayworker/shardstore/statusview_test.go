package shardstore

import (
	"fmt"
	"strings"
	"testing"
)

// viewStatus is <table>_status as "event_id:STATUS:attempts:code" for ids, in id order.
func (f *fixture) viewStatus(ids ...string) string {
	f.t.Helper()
	rows, err := f.db.Query(`SELECT event_id || ':' || status || ':' || attempts || ':' || COALESCE(last_error_code, '')
		FROM ob_status WHERE event_id = ANY($1) ORDER BY event_id`, "{"+strings.Join(ids, ",")+"}")
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return strings.Join(out, " ")
}

// The status view follows the cursor and the hold table through a window read in
// parts (SENT up to pos, PENDING after it), a late transaction (PENDING until a
// window takes it), failures (RETRY with its attempt and code, HELD behind it, DEAD),
// a hold row sent on retry (SENT: it has no hold row any more) and a DEAD hold row
// whose outbox row is gone.
func TestStatusViewFollowsCursorAndHolds(t *testing.T) {
	f := newFixture(t, 4)
	w := f.worker("w1")
	w.rebalance()
	for v := 1; v <= 6; v++ {
		f.insert(f.db, fmt.Sprintf("hot-%d", v), "hot", v)
	}
	late := begin(t, f.db)
	f.insert(late, "late-1", "late", 1) // takes its id and seq now, commits after the tick
	if _, _, err := w.st.Tick(ctx, w.leases.Tokens()); err != nil {
		t.Fatal(err)
	}
	commit(t, late)
	if got := f.viewStatus("hot-1", "hot-6", "late-1"); got != "hot-1:PENDING:0: hot-6:PENDING:0: late-1:PENDING:0:" {
		t.Fatalf("before any read: %s", got)
	}
	b, _, _ := w.batch(4)
	if len(b.Windows) != 1 || b.Windows[0].Done {
		t.Fatalf("want the hot shard's window read in parts, got %+v", b.Windows)
	}
	if got := f.viewStatus("hot-1", "hot-4", "hot-5", "hot-6"); got != "hot-1:SENT:0: hot-4:SENT:0: hot-5:PENDING:0: hot-6:PENDING:0:" {
		t.Fatalf("window read in parts: %s", got)
	}

	f.insert(f.db, "bad-1", "bad", 1)
	f.insert(f.db, "bad-2", "bad", 2)
	f.insert(f.db, "poison-1", "poison", 1)
	w.fail = func(e Event) Result {
		switch e.AggregateID {
		case "bad":
			return Result{Outcome: Failed, Code: "NOT_ENOUGH_REPLICAS", Message: "m"}
		case "poison":
			return Result{Outcome: Rejected, Code: "MESSAGE_TOO_LARGE", Message: "m"}
		}
		return Result{Outcome: Sent}
	}
	w.drain(4)
	want := "bad-1:RETRY:1:NOT_ENOUGH_REPLICAS bad-2:HELD:0: hot-5:SENT:0: hot-6:SENT:0: late-1:SENT:0: poison-1:DEAD:0:MESSAGE_TOO_LARGE"
	if got := f.viewStatus("hot-5", "hot-6", "late-1", "bad-1", "bad-2", "poison-1"); got != want {
		t.Fatalf("after the drain:\n got %s\nwant %s", got, want)
	}

	w.fail = nil
	if _, err := f.db.Exec(`UPDATE ob_hold SET next_attempt_at = now() WHERE state = 'RETRY'`); err != nil {
		t.Fatal(err)
	}
	for i := 0; w.holds() > 0; i++ { // bad-1, then bad-2 (due once bad-1 was sent)
		if i == 5 {
			t.Fatal("the hold rows were not all sent")
		}
	}
	f.insert(f.db, "new-1", "new", 1)
	if got := f.viewStatus("bad-1", "bad-2", "new-1"); got != "bad-1:SENT:0: bad-2:SENT:0: new-1:PENDING:0:" {
		t.Fatalf("after the retry: %s", got)
	}

	// Retention (not built yet) will drop outbox rows; a DEAD hold row stays visible.
	if _, err := f.db.Exec(`DELETE FROM ob WHERE event_id = 'poison-1'`); err != nil {
		t.Fatal(err)
	}
	if got := f.viewStatus("poison-1"); got != "poison-1:DEAD:0:MESSAGE_TOO_LARGE" {
		t.Fatalf("DEAD without its outbox row: %q", got)
	}
	var rows, events int
	if err := f.db.QueryRow(`SELECT (SELECT count(*) FROM ob_status), (SELECT count(*) FROM ob) + 1`).Scan(&rows, &events); err != nil {
		t.Fatal(err)
	}
	if rows != events {
		t.Fatalf("the view has %d rows, want one per event (%d)", rows, events)
	}
}
