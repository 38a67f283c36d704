// trace.go: the caller's OpenTelemetry trace context travels with the event
// (docs/monitoring.md, "Tracing"): Publish writes it into the event's headers, the
// relay copies the headers onto the Kafka record, and inbox continues the trace.

package outbox

import (
	"context"
	"maps"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/outbox-operator/outbox-operator/internal/tracectx"
)

// HeaderTraceparent is the W3C Trace Context header Publish records.
const HeaderTraceparent = tracectx.HeaderTraceparent

// traceHeaders returns h plus the trace context of ctx (the global propagator's
// headers, and at least W3C traceparent/tracestate). It returns h itself when ctx
// carries no valid span or h already names a traceparent (the event set its own),
// and never modifies the caller's map.
func traceHeaders(ctx context.Context, h map[string]string) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return h
	}
	if _, own := h[HeaderTraceparent]; own {
		return h
	}
	out := make(propagation.MapCarrier, len(h)+2)
	tracectx.Inject(ctx, out)
	maps.Copy(out, h) // the event's own headers win over the propagator's
	return out
}
