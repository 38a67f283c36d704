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

// parkAll consumes the topic with a handler that refuses everything, so every
// message ends parked with code "permanent".
func parkAll(t *testing.T, s *inbox.Store, r inbox.Fetcher, n int) {
	t.Helper()
	tl := newTally(n)
	o := fastOptions(tl)
	o.ReplayPoll = -1
	c, err := inbox.NewConsumer(s, func(context.Context, *sql.Tx, inbox.Message) (string, error) {
		return "", inbox.Permanent(errors.New("schema v2 not supported yet"))
	}, o)
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, c, r, tl)
}

// TestReplayHeartbeatsWhileAHandlerRuns: a replay's handler runs for more than three
// ReplayLeases; the replay heartbeats meanwhile, so a second consumer of the group
// that looks for abandoned replays all along never takes it over, and the message is
// applied once.
func TestReplayHeartbeatsWhileAHandlerRuns(t *testing.T) {
	db, s := setup(t)
	b := topicWith(t, 1, event{"p1", "u1", 1, `{}`}.kafka(""))
	r := reader(b, "points")
	defer r.Close()
	parkAll(t, s, r, 1)

	const lease = time.Second
	release := make(chan struct{})
	var aCalls, bCalls atomic.Int32
	slow := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		aCalls.Add(1)
		<-release
		return addPoints(new(atomic.Int32))(ctx, tx, m)
	}
	a, err := inbox.NewConsumer(s, slow, inbox.Options{ReplayLease: lease, ReplayPoll: -1})
	if err != nil {
		t.Fatal(err)
	}
	other, err := inbox.NewConsumer(s, addPoints(&bCalls), inbox.Options{ReplayLease: lease, ReplayPoll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	otherDone := make(chan error, 1)
	go func() { otherDone <- other.Run(ctx, r) }()

	type result struct {
		res inbox.ReplayResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := a.Replay(ctx, inbox.ReplaySelector{EventIDs: []string{"p1"}}, inbox.ReplayOptions{RequestedBy: "ops", Reason: "fixed"})
		done <- result{res, err}
	}()
	waitFor(t, 30*time.Second, "the replay's heartbeat to run 3 leases past its start", func() (float64, bool) {
		var status string
		var beat float64
		err := db.QueryRow(`SELECT status, extract(epoch FROM heartbeat_at - started_at) FROM message_consume_replay`).Scan(&status, &beat)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			t.Fatal(err)
		}
		return beat, status == inbox.ReplayRunning && beat > 3*lease.Seconds()
	})
	if n := bCalls.Load(); n != 0 {
		t.Fatalf("a second consumer took the running replay over (%d calls)", n)
	}
	close(release)
	got := <-done
	if got.err != nil || got.res.Applied != 1 || got.res.Failed != 0 {
		t.Fatalf("replay: %+v %v, want 1 applied", got.res, got.err)
	}
	if aCalls.Load() != 1 || bCalls.Load() != 0 || total(t, db, "u1") != 10 {
		t.Fatalf("calls %d and %d, total %d: want one call and one effect", aCalls.Load(), bCalls.Load(), total(t, db, "u1"))
	}
	cancel()
	if err := <-otherDone; err != context.Canceled {
		t.Fatalf("second consumer's Run: %v", err)
	}
}

// TestReplayWaitsOutADatabaseRestart: the consumer database is killed (SIGKILL) in
// the middle of a replay and comes back a second later; the replay waits and ends
// DONE with every message applied once, instead of FAILED.
func TestReplayWaitsOutADatabaseRestart(t *testing.T) {
	db, s := setup(t)
	b := topicWith(t, 1, event{"p1", "u1", 1, `{}`}.kafka(""), event{"p2", "u2", 1, `{}`}.kafka(""), event{"p3", "u3", 1, `{}`}.kafka(""))
	r := reader(b, "points")
	defer r.Close()
	parkAll(t, s, r, 3)

	var killed atomic.Bool
	restarted := make(chan error, 1)
	var calls atomic.Int32
	fn := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		if m.EventID == "p2" && killed.CompareAndSwap(false, true) {
			if err := srv.Kill9(); err != nil {
				return "", err
			}
			go func() {
				time.Sleep(time.Second) // the database is down this long
				restarted <- srv.Restart()
			}()
			return "", nil // the commit meets the dead database
		}
		return addPoints(&calls)(ctx, tx, m)
	}
	c, err := inbox.NewConsumer(s, fn, inbox.Options{ReplayPoll: -1, Backoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Replay(context.Background(), inbox.ReplaySelector{ErrorCode: inbox.CodePermanent},
		inbox.ReplayOptions{RequestedBy: "ops", Reason: "fixed", Rate: 1000})
	if !killed.Load() {
		t.Fatal("the database was not killed")
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	if err != nil || res.Applied != 3 || res.Failed != 0 {
		t.Fatalf("replay: %+v %v, want 3 applied and none failed", res, err)
	}
	st, err := inbox.ReplayStatus(context.Background(), db, "public", "points", res.ReplayID)
	if err != nil || st.Status != inbox.ReplayDone {
		t.Fatalf("replay status %+v %v, want DONE", st, err)
	}
	if calls.Load() != 3 || total(t, db, "u2") != 10 {
		t.Fatalf("calls %d, u2 total %d: want each effect once", calls.Load(), total(t, db, "u2"))
	}
}
