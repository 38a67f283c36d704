package relay_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
	"github.com/outbox-operator/outbox-operator/outbox"
)

// The producer's trace context, recorded by outbox.Publish in the row's headers, is
// on the Kafka record the relay writes (docs/monitoring.md, "Tracing"); a Publish
// without a span records nothing.
func TestRelayCarriesProducerTraceContext(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	ctx, span := sdktrace.NewTracerProvider().Tracer("test").Start(context.Background(), "place-order")
	defer span.End()
	publishOne(t, ctx, db, tp, "ev-traced")
	publishOne(t, context.Background(), db, tp, "ev-untraced")

	newWorker(t, dsn, db, "w1", opts{}).start(t)
	waitStatus(t, db, "SENT", 2, 10*time.Second)
	recs, err := broker.ReadAllWithin(10*time.Second, tp, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		tparent := header(r, "traceparent")
		switch header(r, "event_id") {
		case "ev-traced":
			carrier := propagation.MapCarrier{"traceparent": tparent}
			got := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
			if got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() {
				t.Errorf("record traceparent %q, want trace %s span %s", tparent, span.SpanContext().TraceID(), span.SpanContext().SpanID())
			}
		case "ev-untraced":
			if tparent != "" {
				t.Errorf("event published without a span has traceparent %q", tparent)
			}
		}
	}
}

func publishOne(t *testing.T, ctx context.Context, db *sql.DB, topic, id string) {
	t.Helper()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	ev := outbox.Event{EventID: id, AggregateType: "order", AggregateID: id, AggregateVersion: 1,
		EventType: "order.placed", Destination: topic, Payload: []byte(`{}`), Headers: map[string]string{"tenant": "t1"}}
	if err := outbox.Default().Publish(ctx, tx, ev); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
