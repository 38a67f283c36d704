// Package batchspan is the relay's OpenTelemetry span per published batch, shared by
// both relay loops (docs/monitoring.md, "Tracing"): kind producer, linked to the span
// of every producer whose trace context outbox.Publish recorded in the row's headers.
// It uses the global TracerProvider: a no-op unless the worker was started with
// OTEL_EXPORTER_OTLP_ENDPOINT (cli), and then nothing here is computed.
package batchspan

import (
	"context"
	"slices"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/tracectx"
)

// TracerName is the instrumentation scope of the relay's spans.
const TracerName = "github.com/outbox-operator/outbox-operator/relay"

// Attributes of the batch span beyond the messaging semantic conventions.
const (
	attrTopics     = attribute.Key("outbox.relay.topics")
	attrPartitions = attribute.Key("outbox.relay.partitions")
	attrOutcome    = attribute.Key("outbox.relay.outcome") // sent, partial, failed
	attrSent       = attribute.Key("outbox.relay.sent")
	attrFailed     = attribute.Key("outbox.relay.failed") // retried, dead or released
)

// Start starts the span of publishing msgs; when it records, it carries a
// link to each message's producer span (traceparent header).
func Start(ctx context.Context, msgs []kafka.Message) (context.Context, trace.Span) {
	ctx, span := otel.Tracer(TracerName).Start(ctx, "send", trace.WithSpanKind(trace.SpanKindProducer))
	if !span.IsRecording() {
		return ctx, span
	}
	var topics []string
	for i := range msgs {
		if !slices.Contains(topics, msgs[i].Topic) {
			topics = append(topics, msgs[i].Topic)
		}
		if sc := producerSpan(msgs[i].Headers); sc.IsValid() {
			span.AddLink(trace.Link{SpanContext: sc})
		}
	}
	attrs := []attribute.KeyValue{semconv.MessagingSystemKafka, semconv.MessagingOperationTypeSend,
		semconv.MessagingOperationName("send"), semconv.MessagingBatchMessageCount(len(msgs)), attrTopics.StringSlice(topics)}
	if len(topics) == 1 {
		span.SetName("send " + topics[0])
		attrs = append(attrs, semconv.MessagingDestinationName(topics[0]))
	}
	span.SetAttributes(attrs...)
	return ctx, span
}

// producerSpan is the span context in a record's headers (invalid when none).
func producerSpan(hs []kafka.Header) trace.SpanContext {
	carrier := propagation.MapCarrier{}
	for _, h := range hs {
		if h.Key == tracectx.HeaderTraceparent || h.Key == "tracestate" {
			carrier[h.Key] = string(h.Value)
		}
	}
	if len(carrier) == 0 {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(tracectx.Extract(context.Background(), carrier))
}

// End records what the brokers did with the batch and ends its span.
func End(span trace.Span, results []publish.Result) {
	if !span.IsRecording() {
		return
	}
	sent := 0
	var partitions []int64
	for _, res := range results {
		if res.Err != nil {
			continue
		}
		sent++
		if p := int64(res.Partition); p >= 0 && !slices.Contains(partitions, p) {
			partitions = append(partitions, p)
		}
	}
	slices.Sort(partitions)
	outcome := "sent"
	switch {
	case sent == 0:
		outcome = "failed"
	case sent < len(results):
		outcome = "partial"
	}
	span.SetAttributes(attrOutcome.String(outcome), attrSent.Int(sent), attrFailed.Int(len(results)-sent),
		attrPartitions.Int64Slice(partitions))
	if outcome != "sent" {
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}
