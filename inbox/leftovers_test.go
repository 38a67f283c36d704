package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/outbox-operator/outbox-operator/inbox"
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
