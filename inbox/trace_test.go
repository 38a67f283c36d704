package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/outbox-operator/outbox-operator/inbox"
)

// useTracer installs an SDK TracerProvider recording into memory as the global one
// for the test, as an application would at start-up.
func useTracer(t *testing.T) (*tracetest.InMemoryExporter, trace.Tracer) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })
	return exp, tp.Tracer("test")
}

// traced returns e's record carrying the trace context of ctx, as the relay writes a
// row that outbox.Publish recorded under a span.
func traced(ctx context.Context, e event) kafka.Message {
	km := e.kafka("payments")
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	for k, v := range carrier {
		km.Headers = append(km.Headers, kafka.Header{Key: k, Value: []byte(v)})
	}
	return km
}

// The consumer span continues the producer's trace: a child of the producer span,
// kind consumer, with the messaging attributes and the message's outcome; the
// handler runs in its context.
func TestConsumerSpanContinuesProducerTrace(t *testing.T) {
	exp, tracer := useTracer(t)
	pctx, producer := tracer.Start(context.Background(), "place-order")
	producer.End()
	_, s := setup(t)
	b := topicWith(t, 1,
		traced(pctx, event{"e1", "u1", 1, `{}`}),
		traced(pctx, event{"e1", "u1", 1, `{}`}), // redelivered
		traced(pctx, event{"e2", "u2", 1, `{"bad":true}`}),
	)
	var mu sync.Mutex
	handlerSpans := map[string]trace.SpanID{}
	handle := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		mu.Lock()
		handlerSpans[m.EventID] = trace.SpanContextFromContext(ctx).SpanID()
		mu.Unlock()
		if m.EventID == "e2" {
			return "", inbox.Permanent(errors.New("cannot apply"))
		}
		return "ok", nil
	}
	tl := newTally(3)
	c, err := inbox.NewConsumer(s, handle, inbox.Options{Observe: tl.observe})
	if err != nil {
		t.Fatal(err)
	}
	r := reader(b, "points")
	defer r.Close()
	runUntil(t, c, r, tl)

	var outcomes []string
	for _, sp := range exp.GetSpans() {
		if sp.SpanKind != trace.SpanKindConsumer {
			continue
		}
		attrs := attribute.NewSet(sp.Attributes...)
		if sp.Parent.SpanID() != producer.SpanContext().SpanID() || sp.SpanContext.TraceID() != producer.SpanContext().TraceID() {
			t.Errorf("consumer span %s: parent %s trace %s, want the producer's span %s in trace %s", sp.Name,
				sp.Parent.SpanID(), sp.SpanContext.TraceID(), producer.SpanContext().SpanID(), producer.SpanContext().TraceID())
		}
		for k, want := range map[attribute.Key]string{"messaging.system": "kafka", "messaging.destination.name": "payments",
			"messaging.consumer.group.name": "points", "messaging.destination.partition.id": "0", "messaging.operation.type": "process"} {
			if v, _ := attrs.Value(k); v.Emit() != want {
				t.Errorf("span %s: %s = %q, want %q", sp.Name, k, v.Emit(), want)
			}
		}
		if _, ok := attrs.Value("messaging.kafka.offset"); !ok {
			t.Errorf("span %s has no offset", sp.Name)
		}
		id, _ := attrs.Value("messaging.message.id")
		o, _ := attrs.Value(inbox.AttrOutcome)
		outcomes = append(outcomes, id.Emit()+":"+o.Emit())
		if o.Emit() == "applied" && handlerSpans[id.Emit()] != sp.SpanContext.SpanID() {
			t.Errorf("handler of %s ran in span %s, want the consumer span %s", id.Emit(), handlerSpans[id.Emit()], sp.SpanContext.SpanID())
		}
	}
	want := map[string]bool{"e1:applied": true, "e1:duplicate": true, "e2:parked": true}
	if len(outcomes) != len(want) {
		t.Fatalf("consumer spans %v, want %v", outcomes, want)
	}
	for _, o := range outcomes {
		if !want[o] {
			t.Errorf("consumer spans %v, want %v", outcomes, want)
		}
	}
}
