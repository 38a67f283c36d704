package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/inbox"
)

// TestReplayAppliesParkedMessagesOnce: two events are parked while their handler is
// broken; after the fix, a replay by error code applies each once, marks both rows
// REPLAYED in the same transaction and records who and why. A second replay finds
// nothing, and a replay of an event that had its effect meanwhile only marks it.
func TestReplayAppliesParkedMessagesOnce(t *testing.T) {
	db, s := setup(t)
	b := topicWith(t, 1, event{"p1", "u1", 1, `{}`}.kafka(""), event{"p2", "u2", 1, `{}`}.kafka(""), event{"ok", "u3", 1, `{}`}.kafka(""))
	var broken atomic.Bool
	broken.Store(true)
	var calls atomic.Int32
	fn := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		if broken.Load() && m.EventID != "ok" {
			return "", inbox.Permanent(errors.New("schema v2 not supported yet"))
		}
		return addPoints(&calls)(ctx, tx, m)
	}
	tl := newTally(3)
	c, err := inbox.NewConsumer(s, fn, fastOptions(tl))
	if err != nil {
		t.Fatal(err)
	}
	r := reader(b, "points")
	defer r.Close()
	runUntil(t, c, r, tl)
	if got := parkedRows(t, db, "points"); len(got) != 2 {
		t.Fatalf("parked %v, want p1 and p2", got)
	}
	broken.Store(false) // the fix is deployed
	ctx := context.Background()
	if _, err := c.Replay(ctx, inbox.ReplaySelector{}, inbox.ReplayOptions{RequestedBy: "ops", Reason: "fix"}); err == nil {
		t.Fatal("a replay without a selector was accepted")
	}
	// p2's effect arrives by another road first (say a redelivery handled elsewhere).
	if _, err := s.Handle(ctx, inbox.Message{EventID: "p2", EventType: "PaymentSucceeded", EventVersion: 1,
		AggregateType: "User", AggregateID: "u2", AggregateVersion: 1, Payload: []byte(`{}`)}, addPoints(&calls)); err != nil {
		t.Fatal(err)
	}
	res, err := c.Replay(ctx, inbox.ReplaySelector{ErrorCode: inbox.CodePermanent}, inbox.ReplayOptions{RequestedBy: "ops@example", Reason: "handler fixed in v1.4", Rate: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Selected != 2 || res.Applied != 1 || res.Duplicates != 1 || res.Failed != 0 {
		t.Fatalf("replay result %+v, want 2 selected, 1 applied, 1 duplicate", res)
	}
	if got := parkedRows(t, db, "points"); len(got) != 0 {
		t.Fatalf("still parked after replay: %v", got)
	}
	if total(t, db, "u1") != 10 || total(t, db, "u2") != 10 || calls.Load() != 3 {
		t.Fatalf("totals u1 %d u2 %d, calls %d: want each effect once", total(t, db, "u1"), total(t, db, "u2"), calls.Load())
	}
	var by, reason string
	var applied, dups int
	if err := db.QueryRow(`SELECT requested_by, reason, applied, duplicates FROM message_consume_replay WHERE replay_id = $1 AND finished_at IS NOT NULL`,
		res.ReplayID).Scan(&by, &reason, &applied, &dups); err != nil || by != "ops@example" || applied != 1 || dups != 1 {
		t.Fatalf("replay record: %q %q %d %d %v", by, reason, applied, dups, err)
	}
	again, err := c.Replay(ctx, inbox.ReplaySelector{ErrorCode: inbox.CodePermanent}, inbox.ReplayOptions{RequestedBy: "ops", Reason: "again"})
	if err != nil || again.Selected != 0 {
		t.Fatalf("second replay: %+v %v, want nothing selected", again, err)
	}
}

// TestReplayThatFailsAgainStaysParked: the handler still fails; the row stays
// PARKED with its attempts counted up.
func TestReplayThatFailsAgainStaysParked(t *testing.T) {
	db, s := setup(t)
	b := topicWith(t, 1, event{"p1", "u1", 1, `{}`}.kafka(""))
	fn := func(context.Context, *sql.Tx, inbox.Message) (string, error) {
		return "", inbox.Permanent(errors.New("still broken"))
	}
	tl := newTally(1)
	c, err := inbox.NewConsumer(s, fn, fastOptions(tl))
	if err != nil {
		t.Fatal(err)
	}
	r := reader(b, "points")
	defer r.Close()
	runUntil(t, c, r, tl)
	res, err := c.Replay(context.Background(), inbox.ReplaySelector{EventIDs: []string{"p1"}}, inbox.ReplayOptions{RequestedBy: "ops", Reason: "try"})
	if err != nil || res.Failed != 1 || res.Applied != 0 {
		t.Fatalf("replay %+v %v, want 1 failed", res, err)
	}
	var attempts int
	if err := db.QueryRow(`SELECT attempts FROM message_consume_parked WHERE event_id = 'p1' AND status = 'PARKED'`).Scan(&attempts); err != nil || attempts != 2 {
		t.Fatalf("attempts %d (%v), want 2", attempts, err)
	}
}

// TestRequestedReplayIsServedByTheRunningConsumer: a replay requested from outside
// the application (as a DeadLetterReplay Job does) is taken by the group's running
// consumer, which replays the parked message with its own handler and records DONE.
func TestRequestedReplayIsServedByTheRunningConsumer(t *testing.T) {
	db, s := setup(t)
	b := topicWith(t, 1, event{"p1", "u1", 1, `{}`}.kafka(""), event{"ok", "u2", 1, `{}`}.kafka(""))
	var broken atomic.Bool
	broken.Store(true)
	var calls atomic.Int32
	fn := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		if broken.Load() && m.EventID == "p1" {
			return "", inbox.Permanent(errors.New("unknown currency"))
		}
		return addPoints(&calls)(ctx, tx, m)
	}
	tl := newTally(2)
	o := fastOptions(tl)
	o.ReplayPoll = 20 * time.Millisecond
	c, err := inbox.NewConsumer(s, fn, o)
	if err != nil {
		t.Fatal(err)
	}
	r := reader(b, "points")
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx, r) }()
	<-tl.done
	broken.Store(false)
	if _, err := inbox.RequestReplay(ctx, db, "public", "points", inbox.ReplaySelector{}, inbox.ReplayOptions{RequestedBy: "x", Reason: "y"}); err == nil {
		t.Fatal("a request without a selector was accepted")
	}
	req, err := inbox.RequestReplay(ctx, db, "public", "points", inbox.ReplaySelector{EventType: "PaymentSucceeded"},
		inbox.ReplayOptions{RequestedBy: "DeadLetterReplay default/fix-currency", Reason: "currency table updated"})
	if err != nil || req.Selected != 1 {
		t.Fatalf("request %+v %v, want 1 selected", req, err)
	}
	var st inbox.ReplayState
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if st, err = inbox.ReplayStatus(ctx, db, "public", "points", req.ID); err != nil || st.Status == inbox.ReplayDone {
			break
		}
	}
	if err != nil || st.Status != inbox.ReplayDone || st.Applied != 1 || st.Selected != 1 {
		t.Fatalf("replay state %+v (%v), want DONE with 1 applied", st, err)
	}
	if total(t, db, "u1") != 10 || len(parkedRows(t, db, "points")) != 0 {
		t.Fatalf("u1 total %d, parked %v", total(t, db, "u1"), parkedRows(t, db, "points"))
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
}

// TestRequestReplayWithAKeyIsIdempotent: a second request with the same key returns
// the first (a retried Job does not ask twice), and FindReplay finds it by key.
func TestRequestReplayWithAKeyIsIdempotent(t *testing.T) {
	db, _ := setup(t)
	ctx := context.Background()
	if _, err := db.Exec(`INSERT INTO message_consume_parked (consumer_group, topic, kafka_partition, kafka_offset, event_id,
		event_type, error_code, error_message, attempts) VALUES ('points', 'payments', 0, 7, 'p1', 'PaymentSucceeded', 'permanent', 'x', 1)`); err != nil {
		t.Fatal(err)
	}
	o := inbox.ReplayOptions{RequestedBy: "ops", Reason: "fix", Key: "default/fix-1/uid-1"}
	first, err := inbox.RequestReplay(ctx, db, "public", "points", inbox.ReplaySelector{EventIDs: []string{"p1"}}, o)
	if err != nil || first.Selected != 1 {
		t.Fatalf("first request %+v %v", first, err)
	}
	again, err := inbox.RequestReplay(ctx, db, "public", "points", inbox.ReplaySelector{EventIDs: []string{"p1"}}, o)
	if err != nil || again != first {
		t.Fatalf("second request %+v %v, want the first %+v", again, err, first)
	}
	st, found, err := inbox.FindReplay(ctx, db, "public", "points", o.Key)
	if err != nil || !found || st.ReplayID != first.ID || st.Status != inbox.ReplayRequested || st.Selected != 1 {
		t.Fatalf("FindReplay = %+v %v %v", st, found, err)
	}
	if _, found, err := inbox.FindReplay(ctx, db, "public", "points", "other"); err != nil || found {
		t.Fatalf("FindReplay(other) found %v, %v", found, err)
	}
}
