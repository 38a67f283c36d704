package batchspan

import (
	"context"
	"errors"
	"testing"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
)

// The batch span's outcome, counts, partitions and name follow the brokers' results.
func TestBatchSpanOutcome(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	ok := func(p int32) publish.Result { return publish.Result{Partition: p, Offset: 1} }
	bad := publish.Result{Partition: -1, Offset: -1, Err: errors.New("refused")}
	tests := []struct {
		name, span, outcome string
		topics              []string
		results             []publish.Result
		sent                int64
		partitions          []int64
		status              codes.Code
	}{
		{"all sent", "send a", "sent", []string{"a", "a", "a"}, []publish.Result{ok(2), ok(0), ok(2)}, 3, []int64{0, 2}, codes.Unset},
		{"partial", "send a", "partial", []string{"a", "a"}, []publish.Result{ok(1), bad}, 1, []int64{1}, codes.Error},
		{"failed, two topics", "send", "failed", []string{"a", "b"}, []publish.Result{bad, bad}, 0, nil, codes.Error},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			exp.Reset()
			msgs := make([]kafka.Message, len(tc.topics))
			for i, topic := range tc.topics {
				msgs[i] = kafka.Message{Topic: topic}
			}
			_, span := Start(context.Background(), msgs)
			End(span, tc.results)
			spans := exp.GetSpans()
			if len(spans) != 1 {
				t.Fatalf("%d spans, want 1", len(spans))
			}
			s := spans[0]
			attrs := attribute.NewSet(s.Attributes...)
			outcome, _ := attrs.Value(attrOutcome)
			sent, _ := attrs.Value(attrSent)
			parts, _ := attrs.Value(attrPartitions)
			count, _ := attrs.Value("messaging.batch.message_count")
			if s.Name != tc.span || outcome.AsString() != tc.outcome || sent.AsInt64() != tc.sent ||
				len(parts.AsInt64Slice()) != len(tc.partitions) || count.AsInt64() != int64(len(msgs)) || s.Status.Code != tc.status {
				t.Errorf("span %q outcome %s sent %d partitions %v count %d status %v; want %q %s %d %v %d %v", s.Name,
					outcome.AsString(), sent.AsInt64(), parts.AsInt64Slice(), count.AsInt64(), s.Status.Code,
					tc.span, tc.outcome, tc.sent, tc.partitions, len(msgs), tc.status)
			}
			for i, p := range tc.partitions {
				if parts.AsInt64Slice()[i] != p {
					t.Errorf("partitions %v, want %v", parts.AsInt64Slice(), tc.partitions)
				}
			}
		})
	}
}
