package inbox

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/segmentio/kafka-go"
)

type nopFetcher struct{}

func (*nopFetcher) FetchMessage(ctx context.Context) (kafka.Message, error) {
	<-ctx.Done()
	return kafka.Message{}, ctx.Err()
}
func (*nopFetcher) CommitMessages(context.Context, ...kafka.Message) error { return nil }

// TestLeftoversGoWithTheirConsumer: the uncommitted messages of a failed Run are held
// by its Consumer for its reader, and only by it: another Consumer on the same reader
// does not see them, and once the Consumer is dropped their payloads are collected
// (the process-wide registry this replaced kept them for the life of the process).
func TestLeftoversGoWithTheirConsumer(t *testing.T) {
	r := &nopFetcher{}
	a, b := &Consumer{}, &Consumer{}
	payload := []byte("card 4242")
	a.left.keep(r, []kafka.Message{{Topic: "payments", Offset: 7, Value: payload}})
	if n := b.left.count(r); n != 0 {
		t.Fatalf("another Consumer sees %d leftovers of the reader", n)
	}
	if got := a.left.count(r); got != 1 {
		t.Fatalf("the Consumer holds %d leftovers, want 1", got)
	}
	gone := weak.Make(&payload[0])
	payload, a = nil, nil
	deadline := time.Now().Add(10 * time.Second)
	for gone.Value() != nil {
		if time.Now().After(deadline) {
			t.Fatal("a dropped Consumer's leftover payload is still reachable")
		}
		runtime.GC()
	}
	runtime.KeepAlive(b)
}

// namedFetcher is a reader with a size: a weak pointer to a zero-size value (such as
// a bare *nopFetcher) never becomes nil, so the test could not see it released.
type namedFetcher struct {
	nopFetcher
	name string
}

// TestLeftoversOfAReplacedReaderAreReleased: a Consumer keeps the uncommitted
// messages of the reader its last Run ran on. When Run starts on another reader (the
// application replaced one that failed, as it must), the old reader and its payloads
// are released and counted for the log, instead of being held for the life of the
// Consumer: the group redelivers them from the committed offset.
func TestLeftoversOfAReplacedReaderAreReleased(t *testing.T) {
	c := &Consumer{}
	old, fresh := &namedFetcher{name: "failed"}, &namedFetcher{name: "new"}
	// 100 bytes: above the tiny allocator's 16, whose shared blocks can keep a dead
	// object reachable for a weak pointer.
	payload := bytes.Repeat([]byte("card 4242 "), 10)
	c.left.keep(old, []kafka.Message{{Topic: "payments", Offset: 7, Value: payload}, {Topic: "payments", Offset: 8}})
	if n := c.left.count(fresh); n != 0 {
		t.Fatalf("the new reader has %d leftovers before its first Run, want 0", n)
	}
	gonePayload, goneReader := weak.Make(&payload[0]), weak.Make(old)
	payload, old = nil, nil

	msgs, released := c.left.take(fresh) // what Run does when it starts on fresh
	if len(msgs) != 0 || released != 2 {
		t.Fatalf("Run on the new reader got %d leftovers and released %d, want 0 and 2", len(msgs), released)
	}
	deadline := time.Now().Add(10 * time.Second)
	for gonePayload.Value() != nil || goneReader.Value() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("after a Run on a new reader the Consumer still holds the old one (payload reachable %v, reader reachable %v)",
				gonePayload.Value() != nil, goneReader.Value() != nil)
		}
		runtime.GC()
	}
	runtime.KeepAlive(c)
	runtime.KeepAlive(fresh)
}
