package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/inbox"
)

// failingCommit is a group reader whose offset commit fails once.
type failingCommit struct {
	*kafkaReader
	failed atomic.Bool
}

func (f *failingCommit) CommitMessages(ctx context.Context, msgs ...kafkaMessage) error {
	if f.failed.CompareAndSwap(false, true) {
		return errCrash
	}
	return f.kafkaReader.CommitMessages(ctx, msgs...)
}

// TestSecondRunOnTheSameReaderLosesNothing: Run returns twice on the same reader,
// once because the offset commit failed and once because it was stopped while the
// handler ran; each time the next Run of the same Consumer on that reader handles the
// message it had fetched (kafka-go has already moved past it) before anything new,
// so no event goes without its effect and none gets two.
func TestSecondRunOnTheSameReaderLosesNothing(t *testing.T) {
	db, s := setup(t)
	b := topicWith(t, 1, event{"e1", "u1", 1, `{}`}.kafka(""), event{"e2", "u1", 2, `{}`}.kafka(""), event{"e3", "u1", 3, `{}`}.kafka(""))
	r := &failingCommit{kafkaReader: reader(b, "points")}
	defer r.Close()
	var calls atomic.Int32
	var blockE2 atomic.Pointer[chan struct{}]
	block := make(chan struct{})
	blockE2.Store(&block)
	fn := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		if b := blockE2.Load(); m.EventID == "e2" && b != nil {
			close(*b)
			<-ctx.Done() // stopped mid-handler
			return "", ctx.Err()
		}
		return addPoints(&calls)(ctx, tx, m)
	}
	var mu sync.Mutex
	var seen []string
	tl := newTally(4)
	observe := func(m inbox.Message, o inbox.Outcome) {
		mu.Lock()
		seen = append(seen, m.EventID+":"+o.String())
		mu.Unlock()
		tl.observe(m, o)
	}
	c, err := inbox.NewConsumer(s, fn, inbox.Options{Observe: observe})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// 1: e1 applied, its offset commit fails.
	if err := c.Run(ctx, r); !errors.Is(err, errCrash) {
		t.Fatalf("first Run: %v", err)
	}
	// 2: e1 again (a duplicate, now committed), then e2 is stopped mid-handler.
	ctx2, cancel := context.WithCancel(ctx)
	go func() { <-block; cancel() }()
	if err := c.Run(ctx2, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("second Run: %v", err)
	}
	blockE2.Store(nil)
	// 3: e2 first, then e3.
	runUntil(t, c, r, tl)
	want := "[e1:applied e1:duplicate e2:applied e3:applied]"
	if got := fmtList(seen); got != want || total(t, db, "u1") != 30 {
		t.Fatalf("outcomes %s, want %s; total %d, want 30", got, want, total(t, db, "u1"))
	}
}

// TestDatabaseOutageIsWaitedOut: the consumer database is killed (SIGKILL) in the
// middle of a batched run and comes back 2 s later. Nothing is parked for it, and
// every event has its effect exactly once.
func TestDatabaseOutageIsWaitedOut(t *testing.T) {
	db, s := setup(t)
	var msgs []kafkaMessage
	for i := 0; i < 400; i++ {
		msgs = append(msgs, event{id(i), "u" + id(i%20), int64(i/20 + 1), `{}`}.kafka(""))
	}
	b := topicWith(t, 3, msgs...)
	var calls atomic.Int32
	var killed atomic.Bool
	fn := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		if calls.Load() == 150 && killed.CompareAndSwap(false, true) {
			if err := srv.Kill9(); err != nil {
				t.Error(err)
			}
			go func() {
				time.Sleep(2 * time.Second)
				if err := srv.Restart(); err != nil {
					t.Error(err)
				}
			}()
		}
		return addPoints(&calls)(ctx, tx, m)
	}
	tl := newTally(400)
	o := fastOptions(tl)
	o.BatchSize, o.MaxBackoff = 50, 200*time.Millisecond
	c, err := inbox.NewConsumer(s, fn, o)
	if err != nil {
		t.Fatal(err)
	}
	r := reader(b, "points")
	defer r.Close()
	runUntil(t, c, r, tl)
	if !killed.Load() || tl.get(inbox.Parked) != 0 || tl.get(inbox.Applied)+tl.get(inbox.Gap) != 400 {
		t.Fatalf("killed %v, outcomes %v: want 400 applied and nothing parked", killed.Load(), tl.by)
	}
	var sum int
	if err := db.QueryRow(`SELECT sum(total) FROM points`).Scan(&sum); err != nil || sum != 4000 {
		t.Fatalf("sum %d (%v), want 4000: an effect was lost or doubled", sum, err)
	}
}

// TestRunWithoutTablesSaysRunMigrate: a consumer database without the inbox tables
// is a set-up error, reported at once with what to do, not waited out forever.
func TestRunWithoutTablesSaysRunMigrate(t *testing.T) {
	_, db := srv.OpenDatabase(t)
	s, err := inbox.New(db, "public", "points")
	if err != nil {
		t.Fatal(err)
	}
	c, err := inbox.NewConsumer(s, func(context.Context, *sql.Tx, inbox.Message) (string, error) { return "", nil }, inbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := topicWith(t, 1)
	r := reader(b, "points")
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Run(ctx, r); err == nil || !strings.Contains(err.Error(), "run inbox.Migrate") {
		t.Fatalf("Run = %v, want an error saying to run inbox.Migrate", err)
	}
}

// TestNewConsumerRejectsBadOptions: options that cannot work are refused up front.
func TestNewConsumerRejectsBadOptions(t *testing.T) {
	_, s := setup(t)
	fn := func(context.Context, *sql.Tx, inbox.Message) (string, error) { return "", nil }
	for _, o := range []inbox.Options{
		{MaxAttempts: -1}, {BatchSize: 20000}, {Backoff: time.Second, MaxBackoff: time.Millisecond},
		{DeadLetterTopic: "dlq"}, // no writer
	} {
		if _, err := inbox.NewConsumer(s, fn, o); err == nil {
			t.Errorf("NewConsumer accepted %+v", o)
		}
	}
	if _, err := inbox.NewConsumer(nil, fn, inbox.Options{}); err == nil {
		t.Error("NewConsumer accepted a nil Store")
	}
}
