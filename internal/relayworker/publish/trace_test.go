package publish

import (
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
)

// The trace context outbox.Publish records in the headers column reaches the record
// as the plain traceparent/tracestate headers in both formats (docs/monitoring.md,
// "Tracing").
func TestTraceHeadersPassInBothFormats(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, f := range []Format{{}, {CloudEvents: true, Source: "/outbox-operator/shop/orders"}} {
		row := &event.Row{EventID: "e", AggregateType: "order", AggregateID: "o-1", AggregateVersion: 1, EventType: "paid",
			Destination: "orders", MessageKey: "o-1", Payload: []byte(`{}`),
			Headers: []byte(`{"traceparent": "` + tp + `", "tracestate": "k=v"}`)}
		m, err := f.Message(row)
		if err != nil {
			t.Fatalf("cloudevents=%t: %v", f.CloudEvents, err)
		}
		got := map[string]string{}
		for _, h := range m.Headers {
			got[h.Key] = string(h.Value)
		}
		if got["traceparent"] != tp || got["tracestate"] != "k=v" {
			t.Errorf("cloudevents=%t: headers %v, want traceparent %s and tracestate k=v", f.CloudEvents, got, tp)
		}
	}
}
