package inbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/inbox"
	relayevent "github.com/outbox-operator/outbox-operator/internal/relayworker/event"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
)

var ceFormat = publish.Format{CloudEvents: true, Source: "/outbox-operator/shop/payments", ContentType: "application/json"}

func paymentRow(id string, version int64, headers string) *relayevent.Row {
	r := &relayevent.Row{EventID: id, AggregateType: "User", AggregateID: "u1", AggregateVersion: version,
		EventType: "PaymentSucceeded", EventVersion: 2, Destination: "payments", MessageKey: "u1",
		Payload: []byte(`{}`), CreatedAt: time.Now()}
	if headers != "" {
		r.Headers = []byte(headers)
	}
	return r
}

func relayed(t *testing.T, f publish.Format, r *relayevent.Row) kafka.Message {
	t.Helper()
	m, err := f.Message(r)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// What the relay writes in either format reads back as the same Message.
func TestFromKafkaReadsBothFormats(t *testing.T) {
	// A native row may carry a ce_specversion header of its own: still native.
	row := paymentRow("e1", 7, `{"ce_specversion": "1.0", "tenant": "t1"}`)
	native, err := inbox.FromKafka(relayed(t, publish.Format{}, row))
	if err != nil {
		t.Fatal(err)
	}
	row.Headers = []byte(`{"tenant": "t1"}`)
	ce, err := inbox.FromKafka(relayed(t, ceFormat, row))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []inbox.Message{native, ce} {
		if m.EventID != "e1" || m.EventType != "PaymentSucceeded" || m.EventVersion != 2 || m.AggregateType != "User" ||
			m.AggregateID != "u1" || m.AggregateVersion != 7 || string(m.Payload) != `{}` || string(m.Key) != "u1" ||
			m.Headers["tenant"] != "t1" {
			t.Errorf("decoded %+v", m)
		}
	}
	if native.RequestHash() != ce.RequestHash() {
		t.Error("the same event hashes differently in the two formats")
	}
	bad := []kafka.Message{
		{Headers: []kafka.Header{{Key: "ce_specversion", Value: []byte("0.3")}, {Key: "ce_id", Value: []byte("e")}}},
		{Headers: []kafka.Header{{Key: "ce_specversion", Value: []byte("1.0")}}},
		{Headers: []kafka.Header{{Key: "ce_specversion", Value: []byte("1.0")}, {Key: "ce_id", Value: []byte("e")},
			{Key: "ce_aggregateversion", Value: []byte("x")}}},
	}
	for i, km := range bad {
		if _, err := inbox.FromKafka(km); !errors.Is(err, inbox.ErrInvalidMessage) {
			t.Errorf("case %d: err = %v, want ErrInvalidMessage", i, err)
		}
	}
}

// A topic that switches format mid-stream (a pipeline's spec.message.format changed)
// is consumed as one stream: dedup and the version guard work across the formats.
func TestConsumeMixedFormats(t *testing.T) {
	db, s := setup(t)
	b := topicWith(t, 1,
		relayed(t, publish.Format{}, paymentRow("e2", 2, "")),
		relayed(t, ceFormat, paymentRow("e2", 2, "")), // the same event again, now as a CloudEvent
		relayed(t, ceFormat, paymentRow("e3", 3, "")),
		relayed(t, publish.Format{}, paymentRow("e1", 1, "")), // an older version, late
	)
	r := reader(b, "points")
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tl := newTally(4)
	var calls atomic.Int32
	go func() { _ = inbox.Consume(ctx, r, s, addPoints(&calls), tl.observe) }()
	select {
	case <-tl.done:
	case <-ctx.Done():
		t.Fatal("consumer did not see 4 messages")
	}
	cancel()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.by[inbox.Applied] != 2 || tl.by[inbox.Duplicate] != 1 || tl.by[inbox.Stale] != 1 {
		t.Errorf("outcomes %v, want 2 applied, 1 duplicate, 1 stale", tl.by)
	}
	if calls.Load() != 2 || total(t, db, "u1") != 20 {
		t.Errorf("handler calls %d, total %d: want 2 and 20", calls.Load(), total(t, db, "u1"))
	}
}
