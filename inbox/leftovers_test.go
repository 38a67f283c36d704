package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/outbox-operator/outbox-operator/inbox"
	"github.com/outbox-operator/outbox-operator/internal/testenv/logtest"
)

// byValue is a Fetcher held by value with a slice in it: it cannot key the
// uncommitted messages of a failed Run.
type byValue struct {
	*kafkaReader
	tags []string
}

// TestRunRefusesAReaderItCannotTrack: a Fetcher that is not comparable is refused at
// once with an error saying what to pass, instead of being run without protection
// for the messages a failed Run leaves behind.
func TestRunRefusesAReaderItCannotTrack(t *testing.T) {
	_, s := setup(t)
	b := topicWith(t, 1, event{"e1", "u1", 1, `{}`}.kafka(""))
	r := reader(b, "points")
	defer r.Close()
	c, err := inbox.NewConsumer(s, addPoints(new(atomic.Int32)), inbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run(context.Background(), byValue{kafkaReader: r, tags: []string{"a"}})
	if err == nil || !strings.Contains(err.Error(), "not comparable") || !strings.Contains(err.Error(), "pointer") {
		t.Fatalf("Run = %v, want a refusal saying to pass a pointer", err)
	}
	if err := c.Run(context.Background(), nil); err == nil {
		t.Fatal("Run accepted a nil Fetcher")
	}
}

// TestConsumeSaysWhatItLeftUncommitted: Consume's Consumer lives for one call, so
// when its offset commit fails it says how many fetched messages were not committed
// (they are not silently left to a second Consume, which would skip them).
func TestConsumeSaysWhatItLeftUncommitted(t *testing.T) {
	_, s := setup(t)
	b := topicWith(t, 1, event{"e1", "u1", 1, `{}`}.kafka(""))
	r := &failingCommit{kafkaReader: reader(b, "points")}
	defer r.Close()
	fn := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) { return "", nil }
	err := inbox.Consume(context.Background(), r, s, fn, nil)
	if !errors.Is(err, errCrash) || !strings.Contains(err.Error(), "1 fetched messages were not committed") {
		t.Fatalf("Consume = %v, want the commit failure and the count of uncommitted messages", err)
	}
}

// TestRunOnANewReaderReleasesTheOldReadersMessages: the offset commit fails, so Run
// returns with a fetched message uncommitted; the application closes that reader and
// runs the same Consumer on a new one, as it must for a reader that failed. The
// Consumer releases the old reader and its message (and says so), instead of holding
// them for its whole life, and the group redelivers the message to the new reader,
// where it is a Duplicate: one effect.
func TestRunOnANewReaderReleasesTheOldReadersMessages(t *testing.T) {
	db, s := setup(t)
	b := topicWith(t, 1, event{"e1", "u1", 1, `{}`}.kafka(""))
	tl := newTally(2) // applied by the first Run, a duplicate in the second
	var logs logtest.Lines
	c, err := inbox.NewConsumer(s, addPoints(new(atomic.Int32)), inbox.Options{Observe: tl.observe, Log: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	old := &failingCommit{kafkaReader: reader(b, "points")}
	if err := c.Run(context.Background(), old); !errors.Is(err, errCrash) {
		t.Fatalf("first Run = %v, want the failed offset commit", err)
	}
	if err := old.Close(); err != nil {
		t.Fatalf("close the failed reader: %v", err)
	}
	gone := weak.Make(old)
	old = nil

	fresh := reader(b, "points")
	defer fresh.Close()
	runUntil(t, c, fresh, tl)
	if tl.get(inbox.Applied) != 1 || tl.get(inbox.Duplicate) != 1 || total(t, db, "u1") != 10 {
		t.Fatalf("outcomes %v, total %d: want e1 applied once, then a duplicate", tl.by, total(t, db, "u1"))
	}
	if n := logs.Count(`released the uncommitted messages`, `"messages":1`); n != 1 {
		t.Fatalf("%d log lines say the old reader's message was released, want 1", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for gone.Value() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the Consumer still holds the replaced reader (and its uncommitted messages)")
		}
		runtime.GC()
	}
	runtime.KeepAlive(c)
}

// TestRunRefusesASecondRunOfTheSameConsumer: a Consumer runs on one reader at a
// time, so the uncommitted messages it keeps are one reader's; a second Run while one
// runs is refused at once, saying to make one Consumer per reader.
func TestRunRefusesASecondRunOfTheSameConsumer(t *testing.T) {
	_, s := setup(t)
	b := topicWith(t, 1, event{"e1", "u1", 1, `{}`}.kafka(""))
	tl := newTally(1)
	c, err := inbox.NewConsumer(s, addPoints(new(atomic.Int32)), inbox.Options{Observe: tl.observe})
	if err != nil {
		t.Fatal(err)
	}
	startRun(t, c, reader(b, "points"))
	select {
	case <-tl.done: // the first Run is running
	case <-time.After(60 * time.Second):
		t.Fatal("the first Run handled nothing in 60s")
	}
	other := reader(b, "points")
	defer other.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Run(ctx, other); err == nil || !strings.Contains(err.Error(), "already running") || !strings.Contains(err.Error(), "one Consumer per reader") {
		t.Fatalf("second Run = %v, want a refusal saying to make one Consumer per reader", err)
	}
}
