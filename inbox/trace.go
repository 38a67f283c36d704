// trace.go: inbox continues the producer's trace (docs/monitoring.md, "Tracing"): one
// consumer span per message, from the moment the consumer takes it to its outcome,
// whose context the handler receives. It uses the global TracerProvider, a no-op
// unless the application installs one.

package inbox

import (
	"context"
	"strconv"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/outbox-operator/outbox-operator/internal/tracectx"
)

// TracerName is the instrumentation scope of inbox's spans.
const TracerName = "github.com/outbox-operator/outbox-operator/inbox"

// AttrOutcome is the span attribute holding the message's Outcome (applied,
// duplicate, stale, gap, parked).
const AttrOutcome = attribute.Key("outbox.inbox.outcome")

// startSpan starts the consumer span of one fetched message (OpenTelemetry messaging
// semantic conventions, "process" operation), a child of the producer's span when
// the record carries one. The attributes are only built when the span records.
func (c *Consumer) startSpan(ctx context.Context, km kafka.Message, m Message) (context.Context, trace.Span) {
	ctx, span := otel.Tracer(TracerName).Start(tracectx.Extract(ctx, propagation.MapCarrier(m.Headers)),
		"process "+km.Topic, trace.WithSpanKind(trace.SpanKindConsumer))
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(
		semconv.MessagingSystemKafka,
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(km.Topic),
		semconv.MessagingDestinationPartitionID(strconv.Itoa(km.Partition)),
		semconv.MessagingKafkaOffset(int(km.Offset)),
		semconv.MessagingConsumerGroupName(c.s.group),
	)
	if m.EventID != "" {
		span.SetAttributes(semconv.MessagingMessageID(m.EventID))
	}
	return ctx, span
}

// endSpan records the message's outcome (and why it was parked) and ends its span.
func endSpan(in incoming, o Outcome, cause error) {
	if in.span == nil || !in.span.IsRecording() {
		return
	}
	in.span.SetAttributes(AttrOutcome.String(o.String()))
	if cause != nil {
		in.span.RecordError(cause)
		in.span.SetStatus(codes.Error, "parked")
	}
	in.span.End()
}

// abandonSpans ends the spans of messages left unhandled (the consumer stopped, or
// a message could not be parked: they are redelivered). An ended span ignores this.
func abandonSpans(ins []incoming) {
	for _, in := range ins {
		if in.span != nil && in.span.IsRecording() {
			in.span.SetStatus(codes.Error, "not handled; redelivered later")
			in.span.End()
		}
	}
}
