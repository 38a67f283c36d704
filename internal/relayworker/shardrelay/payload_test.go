package shardrelay_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/outbox"
)

// A v2 table's payload column is json: the relay publishes the bytes the producer
// wrote (whitespace, key order, duplicate keys and number spelling kept), from a
// plain INSERT and from the outbox package alike, and the headers column's pairs
// arrive as headers (docs/architecture.md, "Message contract").
func TestPayloadIsPublishedAsWritten(t *testing.T) {
	dsn, db := newTable(t)
	tp := topic(t)
	plain := `{"b": 1,   "a": [1, 2.50, 1e3], "b": 2}`
	insert(t, db, ev{agg: "p", version: 1, topic: tp, payload: plain})
	pub, err := outbox.New(tb.Schema, tb.Name)
	if err != nil {
		t.Fatal(err)
	}
	viaLib := `{ "z":0,"y" : "é\u00e9" }`
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, tx, outbox.Event{EventID: "lib-1", AggregateType: "order", AggregateID: "q", AggregateVersion: 1,
		EventType: "order.changed", Destination: tp, Payload: json.RawMessage(viaLib), Headers: map[string]string{"tenant": "t-1"}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	start(t, dsn, "w1", opts{})
	recs, err := broker.ReadAllWithin(30*time.Second, tp, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"p-v1": plain, "lib-1": viaLib}
	for _, r := range recs {
		id := header(r, "event_id")
		if string(r.Value) != want[id] {
			t.Errorf("%s: value %s, want %s as written", id, r.Value, want[id])
		}
		delete(want, id)
		if id == "lib-1" && header(r, "tenant") != "t-1" {
			t.Errorf("%s: tenant header %q, want t-1", id, header(r, "tenant"))
		}
	}
	if len(want) != 0 {
		t.Fatalf("not received: %v", want)
	}
}

// A v2 table made before the payload became json has jsonb columns: it keeps
// working, publishing the JSON text PostgreSQL prints for each value.
func TestJSONBPayloadOfAnOlderTableIsPublished(t *testing.T) {
	dsn, db := newTable(t)
	if _, err := db.ExecContext(ctx, `ALTER TABLE outbox_v2 ALTER payload TYPE jsonb USING payload::jsonb,
		ALTER headers TYPE jsonb USING headers::jsonb`); err != nil {
		t.Fatal(err)
	}
	tp := topic(t)
	insert(t, db, ev{agg: "p", version: 1, topic: tp, payload: `{"b": 1,   "a": [1, 2.50, 1e3], "b": 2}`})
	start(t, dsn, "w1", opts{})
	recs, err := broker.ReadAllWithin(30*time.Second, tp, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a": [1, 2.50, 1000], "b": 2}`; string(recs[0].Value) != want {
		t.Fatalf("value %s, want jsonb's text %s", recs[0].Value, want)
	}
}
