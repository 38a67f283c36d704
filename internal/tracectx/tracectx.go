// Package tracectx carries an OpenTelemetry trace context in message headers
// (docs/monitoring.md, "Tracing"): the application's global propagator, and at least
// W3C Trace Context, since OpenTelemetry's default global propagator is a no-op and
// traceparent is what the outbox headers promise.
package tracectx

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// HeaderTraceparent is the W3C Trace Context header.
const HeaderTraceparent = "traceparent"

var w3c = propagation.TraceContext{}

// Inject writes the trace context of ctx into carrier: what the global propagator
// writes, and W3C traceparent/tracestate when it wrote no traceparent.
func Inject(ctx context.Context, carrier propagation.MapCarrier) {
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	if _, ok := carrier[HeaderTraceparent]; !ok {
		w3c.Inject(ctx, carrier)
	}
}

// Extract returns ctx with the remote span context carrier holds (global
// propagator first, then W3C traceparent); ctx unchanged when it holds none.
func Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	out := otel.GetTextMapPropagator().Extract(ctx, carrier)
	if !trace.SpanContextFromContext(out).IsValid() {
		out = w3c.Extract(out, carrier)
	}
	return out
}
