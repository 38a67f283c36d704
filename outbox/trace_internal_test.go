package outbox

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestTraceHeaders(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled,
	})
	spanCtx := trace.ContextWithSpanContext(context.Background(), sc)
	const want = "00-01020300000000000000000000000000-0405060000000000-01"
	tests := []struct {
		name   string
		ctx    context.Context
		in     map[string]string
		parent string // traceparent in the result
	}{
		{"no span, no headers", context.Background(), nil, ""},
		{"no span keeps headers", context.Background(), map[string]string{"a": "b"}, ""},
		{"span, no headers", spanCtx, nil, want},
		{"span adds to headers", spanCtx, map[string]string{"a": "b"}, want},
		{"event's own traceparent wins", spanCtx, map[string]string{"traceparent": "mine"}, "mine"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(tc.in)
			got := traceHeaders(tc.ctx, tc.in)
			if got[HeaderTraceparent] != tc.parent {
				t.Errorf("traceparent %q, want %q", got[HeaderTraceparent], tc.parent)
			}
			if len(tc.in) != before {
				t.Errorf("caller's map modified: %v", tc.in)
			}
			for k, v := range tc.in {
				if got[k] != v {
					t.Errorf("header %s = %q, want the event's %q", k, got[k], v)
				}
			}
		})
	}
}
