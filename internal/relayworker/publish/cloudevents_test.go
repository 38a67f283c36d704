package publish

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
)

func TestCloudEventsMapping(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 891000, time.FixedZone("CET", 3600))
	row := &event.Row{EventID: "e", AggregateType: "order", AggregateID: "o-1", AggregateVersion: 3, EventType: "paid",
		EventVersion: 2, Destination: "orders", MessageKey: "k", Payload: []byte(`{"a": 1}`), Headers: []byte(`{"x": "1", "ce_traceparent": "00-ab"}`),
		CreatedAt: at}
	f := Format{CloudEvents: true, Source: "/outbox-operator/shop/orders", ContentType: "application/json"}
	m, err := f.Message(row)
	if err != nil {
		t.Fatal(err)
	}
	if m.Topic != "orders" || string(m.Key) != "k" || string(m.Value) != `{"a": 1}` {
		t.Fatalf("%+v", m)
	}
	want := map[string]string{"ce_specversion": "1.0", "ce_id": "e", "ce_source": "/outbox-operator/shop/orders",
		"ce_type": "paid", "ce_time": "2026-03-04T04:06:07.000891Z", "ce_subject": "o-1", "ce_eventversion": "2",
		"ce_aggregatetype": "order", "ce_aggregateversion": "3", "content-type": "application/json",
		"x": "1", "ce_traceparent": "00-ab"}
	if got := headerMap(m.Headers); !maps.Equal(got, want) {
		t.Fatalf("headers %v\nwant    %v", got, want)
	}

	// bytea: no content-type of the relay's, so the row may name its own.
	bin := Format{CloudEvents: true, Source: "/s"}
	r := *row
	r.Headers = []byte(`{"content-type": "application/protobuf"}`)
	m, err = bin.Message(&r)
	if err != nil {
		t.Fatal(err)
	}
	if got := headerMap(m.Headers); got["content-type"] != "application/protobuf" {
		t.Errorf("bytea row's content-type: %v", got)
	}
	// subject, when present, must not be empty: no aggregate id, no ce_subject.
	r = *row
	r.AggregateID, r.Headers = "", nil
	m, err = f.Message(&r)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := headerMap(m.Headers)["ce_subject"]; ok {
		t.Error("empty aggregate id still sent as ce_subject")
	}
}

func TestCloudEventsRefusals(t *testing.T) {
	row := event.Row{EventID: "e", AggregateID: "o", EventType: "paid", Destination: "orders", Payload: []byte(`{}`)}
	f := Format{CloudEvents: true, Source: "/s", ContentType: "application/json"}
	cases := []struct {
		name string
		mut  func(*event.Row)
	}{
		{"override ce_id", func(r *event.Row) { r.Headers = []byte(`{"ce_id": "spoof"}`) }},
		{"override ce_source", func(r *event.Row) { r.Headers = []byte(`{"ce_source": "/x"}`) }},
		{"override ce_aggregateversion", func(r *event.Row) { r.Headers = []byte(`{"ce_aggregateversion": "9"}`) }},
		{"override content-type the relay sets", func(r *event.Row) { r.Headers = []byte(`{"content-type": "text/xml"}`) }},
		{"native contract name", func(r *event.Row) { r.Headers = []byte(`{"event_id": "x"}`) }},
		{"no event type", func(r *event.Row) { r.EventType = "" }},
	}
	for _, c := range cases {
		r := row
		c.mut(&r)
		_, err := f.Message(&r)
		var be *BadEventError
		if !errors.As(err, &be) || be.Code != CodeInvalidHeaders {
			t.Errorf("%s: %v, want %s", c.name, err, CodeInvalidHeaders)
		}
	}
	// ce_ names are plain headers in the native format (consumers see event_id first).
	r := row
	r.Headers = []byte(`{"ce_id": "x"}`)
	if _, err := (Format{}).Message(&r); err != nil {
		t.Errorf("ce_id header in native format: %v", err)
	}
}

func headerMap(hs []kafka.Header) map[string]string {
	out := make(map[string]string, len(hs))
	for _, h := range hs {
		out[h.Key] = string(h.Value)
	}
	return out
}
