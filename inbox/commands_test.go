package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/inbox"
)

// calls records the calls made to a fake external system, by idempotency key.
type calls struct {
	mu  sync.Mutex
	key map[string]int
}

func (c *calls) add(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.key == nil {
		c.key = map[string]int{}
	}
	c.key[key]++
	return c.key[key]
}

func (c *calls) of(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.key[key]
}

func dispatch(t *testing.T, cmds *inbox.Commands, fn inbox.CommandFunc, o inbox.DispatchOptions) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmds.Dispatch(ctx, fn, o) }()
	return func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Dispatch returned %v", err)
		}
	}
}

func waitStatus(t *testing.T, cmds *inbox.Commands, kind, key, want string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, attempts, err := cmds.CommandStatus(context.Background(), kind, key)
		if err == nil && st == want {
			return attempts
		}
		if time.Now().After(deadline) {
			t.Fatalf("command %s/%s: status %q (%v), want %s", kind, key, st, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCommandsCommitWithTheEffectAndRunOnce: a command enqueued by a handler whose
// transaction rolls back does not exist; the redelivery enqueues it once (a second
// enqueue of the same key is a no-op), the dispatcher calls with the event id as the
// idempotency key, retries a failure, and marks DONE only after the call succeeded.
func TestCommandsCommitWithTheEffectAndRunOnce(t *testing.T) {
	db, s := setup(t)
	cmds, err := inbox.NewCommands(db, "public", "notify")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var failFirst atomic.Bool
	failFirst.Store(true)
	handler := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		if err := cmds.Enqueue(ctx, tx, inbox.Command{Kind: "sms", Key: m.EventID, Payload: []byte("+4912345")}); err != nil {
			return "", err
		}
		if failFirst.CompareAndSwap(true, false) {
			return "", errors.New("crash after enqueue")
		}
		return "", nil
	}
	m := msg("pay-1", 1, `{}`)
	if _, err := s.Handle(ctx, m, handler); err == nil {
		t.Fatal("first delivery should fail")
	}
	if _, _, err := cmds.CommandStatus(ctx, "sms", "pay-1"); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("a rolled-back handler left a command behind: %v", err)
	}
	for range 2 { // the redelivery, and a duplicate of it
		if _, err := s.Handle(ctx, m, handler); err != nil {
			t.Fatal(err)
		}
	}
	var sent calls
	var flaky atomic.Bool
	flaky.Store(true)
	stop := dispatch(t, cmds, func(ctx context.Context, c inbox.Command) error {
		sent.add(c.Key)
		if flaky.CompareAndSwap(true, false) {
			return errors.New("gateway 503")
		}
		return nil
	}, inbox.DispatchOptions{Poll: 10 * time.Millisecond, Backoff: 10 * time.Millisecond})
	defer stop()
	if attempts := waitStatus(t, cmds, "sms", "pay-1", inbox.CommandDone); attempts != 2 || sent.of("pay-1") != 2 {
		t.Fatalf("attempts %d, calls %d; want a failed call and a successful one", attempts, sent.of("pay-1"))
	}
}

// TestCommandPermanentFailureIsParked: a Permanent error parks the command at once.
func TestCommandPermanentFailureIsParked(t *testing.T) {
	db, s := setup(t)
	cmds, _ := inbox.NewCommands(db, "public", "notify")
	ctx := context.Background()
	if _, err := s.Handle(ctx, msg("pay-2", 1, `{}`), func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		return "", cmds.Enqueue(ctx, tx, inbox.Command{Kind: "sms", Key: m.EventID})
	}); err != nil {
		t.Fatal(err)
	}
	var sent calls
	stop := dispatch(t, cmds, func(_ context.Context, c inbox.Command) error {
		sent.add(c.Key)
		return inbox.Permanent(errors.New("number not reachable"))
	}, inbox.DispatchOptions{Poll: 10 * time.Millisecond})
	defer stop()
	waitStatus(t, cmds, "sms", "pay-2", inbox.CommandParked)
	time.Sleep(100 * time.Millisecond) // ten more polls: a parked command is not called again
	if sent.of("pay-2") != 1 {
		t.Fatalf("calls %d, want 1", sent.of("pay-2"))
	}
}

// TestCommandLeaseIsFenced: a dispatcher that hangs past its lease loses the command
// to another dispatcher, which calls again with the same idempotency key and marks it
// DONE; the first dispatcher's late failure does not undo that.
func TestCommandLeaseIsFenced(t *testing.T) {
	db, s := setup(t)
	cmds, _ := inbox.NewCommands(db, "public", "notify")
	ctx := context.Background()
	if _, err := s.Handle(ctx, msg("pay-3", 1, `{}`), func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		return "", cmds.Enqueue(ctx, tx, inbox.Command{Kind: "sms", Key: m.EventID})
	}); err != nil {
		t.Fatal(err)
	}
	var sent calls
	release := make(chan struct{})
	slow := func(_ context.Context, c inbox.Command) error {
		sent.add(c.Key)
		<-release // hangs, ignoring its context
		return errors.New("timed out late")
	}
	o := inbox.DispatchOptions{Poll: 10 * time.Millisecond, Lease: time.Second}
	stopSlow := dispatch(t, cmds, slow, o)
	deadline := time.Now().Add(10 * time.Second)
	for sent.of("pay-3") == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stopFast := dispatch(t, cmds, func(_ context.Context, c inbox.Command) error { sent.add(c.Key); return nil }, o)
	defer stopFast()
	waitStatus(t, cmds, "sms", "pay-3", inbox.CommandDone)
	close(release)
	stopSlow()
	if st, _, err := cmds.CommandStatus(ctx, "sms", "pay-3"); err != nil || st != inbox.CommandDone || sent.of("pay-3") != 2 {
		t.Fatalf("status %s (%v), calls %d: want DONE after two calls with one key", st, err, sent.of("pay-3"))
	}
}

// TestStoppedDispatcherHandsBackWhatItDidNotCall: a paced dispatcher stopped after
// one call leaves the other claimed commands PENDING with no attempt counted, not
// RUNNING until their lease ends.
func TestStoppedDispatcherHandsBackWhatItDidNotCall(t *testing.T) {
	db, s := setup(t)
	cmds, _ := inbox.NewCommands(db, "public", "notify")
	ctx := context.Background()
	for i := range 5 {
		if _, err := s.Handle(ctx, msg(id(i), int64(i+1), `{}`), func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
			return "", cmds.Enqueue(ctx, tx, inbox.Command{Kind: "sms", Key: m.EventID})
		}); err != nil {
			t.Fatal(err)
		}
	}
	var sent calls
	first := make(chan struct{})
	stop := dispatch(t, cmds, func(_ context.Context, c inbox.Command) error {
		if sent.add(c.Key) == 1 && c.Key == "0" {
			close(first)
		}
		return nil
	}, inbox.DispatchOptions{Rate: 0.5, Poll: 10 * time.Millisecond}) // one call per 2 s
	<-first
	stop()
	var pending, running int
	if err := db.QueryRow(`SELECT count(*) FILTER (WHERE status = 'PENDING' AND attempts = 0),
		count(*) FILTER (WHERE status = 'RUNNING') FROM message_command`).Scan(&pending, &running); err != nil {
		t.Fatal(err)
	}
	if pending != 4 || running != 0 {
		t.Fatalf("%d pending with no attempt, %d running; want 4 and 0", pending, running)
	}
}
