package tracectx

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

var sc = trace.NewSpanContext(trace.SpanContextConfig{
	TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled,
})

// OpenTelemetry's default global propagator writes nothing; traceparent is still
// written and read back.
func TestRoundTripWithoutGlobalPropagator(t *testing.T) {
	carrier := propagation.MapCarrier{}
	Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)
	if carrier[HeaderTraceparent] == "" {
		t.Fatalf("carrier %v has no traceparent", carrier)
	}
	got := trace.SpanContextFromContext(Extract(context.Background(), carrier))
	if got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsRemote() {
		t.Errorf("extracted %v, want remote %v", got, sc)
	}
	if got := trace.SpanContextFromContext(Extract(context.Background(), propagation.MapCarrier{})); got.IsValid() {
		t.Errorf("empty carrier gave %v", got)
	}
}

// The application's propagator is used too (baggage travels along).
func TestInjectUsesGlobalPropagator(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	defer otel.SetTextMapPropagator(prev)
	m, _ := baggage.NewMember("tenant", "t1")
	b, _ := baggage.New(m)
	ctx := baggage.ContextWithBaggage(trace.ContextWithSpanContext(context.Background(), sc), b)
	carrier := propagation.MapCarrier{}
	Inject(ctx, carrier)
	if carrier["baggage"] != "tenant=t1" || carrier[HeaderTraceparent] == "" {
		t.Errorf("carrier %v, want traceparent and baggage tenant=t1", carrier)
	}
}
