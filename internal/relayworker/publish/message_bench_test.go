package publish

import (
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
)

// BenchmarkMessage maps a row like make bench's (a ~300-byte payload, a headers
// object of two strings) to a message: the relay's per-event CPU outside the driver
// and kafka-go.
func BenchmarkMessage(b *testing.B) {
	r := &event.Row{EventID: "0b7c6a38-3f0c-4f39-9d43-7d8f36d1e4a1", AggregateType: "order", AggregateID: "agg-01234",
		AggregateVersion: 7, EventType: "order.changed", EventVersion: 1, Destination: "bench.orders", MessageKey: "agg-01234",
		Payload: make([]byte, 300),
		Headers: []byte(`{"tenant": "t-34", "traceparent": "00-0000000000000000000000000000abcd-0000000000001234-01"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (Format{}).Message(r); err != nil {
			b.Fatal(err)
		}
	}
}
