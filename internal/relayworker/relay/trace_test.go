package relay_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/outbox-operator/outbox-operator/inbox"
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

// One event followed across the pipeline with the SDK's in-memory exporter: the
// producer's span, the relay's batch span linked to it, and the inbox consumer span
// continuing the producer's trace (docs/monitoring.md, "Tracing").
func TestTraceProducerRelayConsumer(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })

	dsn, db := relaytest.NewDB(t)
	topicName := topic(t)
	ctx, producer := tp.Tracer("shop").Start(context.Background(), "place-order")
	publishOne(t, ctx, db, topicName, "ev-e2e")
	producer.End()
	newWorker(t, dsn, db, "w1", opts{}).start(t)
	waitStatus(t, db, "SENT", 1, 10*time.Second)
	consumeOne(t, db, topicName)

	var batch, consumer *tracetest.SpanStub
	spans := exp.GetSpans()
	for i := range spans {
		switch spans[i].SpanKind {
		case trace.SpanKindProducer:
			batch = &spans[i]
		case trace.SpanKindConsumer:
			consumer = &spans[i]
		}
	}
	if batch == nil || consumer == nil {
		t.Fatalf("spans %v: want a producer (relay batch) and a consumer span", spanNames(spans))
	}
	want := producer.SpanContext()
	if len(batch.Links) != 1 || batch.Links[0].SpanContext.TraceID() != want.TraceID() || batch.Links[0].SpanContext.SpanID() != want.SpanID() {
		t.Errorf("batch span links %v, want one to the producer span %s", batch.Links, want.SpanID())
	}
	battrs := attribute.NewSet(batch.Attributes...)
	for k, v := range map[attribute.Key]string{"messaging.system": "kafka", "messaging.destination.name": topicName,
		"messaging.batch.message_count": "1", "outbox.relay.outcome": "sent", "outbox.relay.sent": "1"} {
		if got, _ := battrs.Value(k); got.Emit() != v {
			t.Errorf("batch span %s = %q, want %q", k, got.Emit(), v)
		}
	}
	if p, _ := battrs.Value("outbox.relay.partitions"); len(p.AsInt64Slice()) != 1 {
		t.Errorf("batch span partitions %v, want the one partition written", p.AsInt64Slice())
	}
	if consumer.SpanContext.TraceID() != want.TraceID() || consumer.Parent.SpanID() != want.SpanID() {
		t.Errorf("consumer span in trace %s under %s, want trace %s under the producer span %s",
			consumer.SpanContext.TraceID(), consumer.Parent.SpanID(), want.TraceID(), want.SpanID())
	}
	cattrs := attribute.NewSet(consumer.Attributes...)
	if o, _ := cattrs.Value(inbox.AttrOutcome); o.Emit() != "applied" {
		t.Errorf("consumer outcome %q, want applied", o.Emit())
	}
}

// consumeOne runs an inbox consumer (group "e2e") on topic until it applied one event.
func consumeOne(t *testing.T, db *sql.DB, topic string) {
	t.Helper()
	if err := inbox.Migrate(context.Background(), db, "public"); err != nil {
		t.Fatal(err)
	}
	s, err := inbox.New(db, "public", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	applied := make(chan struct{}, 1)
	handle := func(context.Context, *sql.Tx, inbox.Message) (string, error) { return "ok", nil }
	c, err := inbox.NewConsumer(s, handle, inbox.Options{Observe: func(_ inbox.Message, o inbox.Outcome) {
		if o == inbox.Applied {
			applied <- struct{}{}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: broker.Addrs(), GroupID: "e2e", Topic: topic,
		MaxWait: 50 * time.Millisecond, HeartbeatInterval: 200 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx, r) }()
	select {
	case <-applied:
	case err := <-errc:
		t.Fatalf("consumer stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("consumer applied nothing within 30s")
	}
	cancel()
	<-errc
}

func spanNames(spans tracetest.SpanStubs) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name+"/"+s.SpanKind.String())
	}
	return names
}
