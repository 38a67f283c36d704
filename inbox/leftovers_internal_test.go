package inbox

import (
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
