package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
	"github.com/outbox-operator/outbox-operator/outbox"
)

func TestMain(m *testing.M) { relaytest.Main(m) }

func good(id string) outbox.Event {
	return outbox.Event{EventID: id, AggregateType: "order", AggregateID: "o-1", AggregateVersion: 1,
		EventType: "order.paid", Destination: "orders", Payload: json.RawMessage(`{"amount":10}`),
		Headers: map[string]string{"traceparent": "00-x"}}
}

func TestValidateRejectsBadEvents(t *testing.T) {
	cases := map[string]func(*outbox.Event){
		"missing id":        func(e *outbox.Event) { e.EventID = "" },
		"missing aggregate": func(e *outbox.Event) { e.AggregateID = "" },
		"missing type":      func(e *outbox.Event) { e.AggregateType = " " },
		"version 0":         func(e *outbox.Event) { e.AggregateVersion = 0 },
		"missing evtype":    func(e *outbox.Event) { e.EventType = "" },
		"empty destination": func(e *outbox.Event) { e.Destination = "" },
		"bad topic":         func(e *outbox.Event) { e.Destination = "a b" },
		"non-JSON payload":  func(e *outbox.Event) { e.Payload = json.RawMessage(`{not json`) },
		"empty payload":     func(e *outbox.Event) { e.Payload = nil },
		"reserved header":   func(e *outbox.Event) { e.Headers = map[string]string{"event_id": "x"} },
	}
	for name, mut := range cases {
		e := good("x")
		mut(&e)
		err := e.Validate()
		if !errors.Is(err, outbox.ErrInvalidEvent) {
			t.Errorf("%s: err %v, want ErrInvalidEvent", name, err)
		}
	}
	e := good("x")
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestEventIDStable(t *testing.T) {
	a := outbox.EventID("payment-succeeded", "p-1")
	if a != outbox.EventID("payment-succeeded", "p-1") {
		t.Fatal("not deterministic")
	}
	if a == outbox.EventID("payment-succeeded", "p-2") || outbox.EventID("ab", "c") == outbox.EventID("a", "bc") {
		t.Fatal("collision")
	}
	if len(a) != 36 || a[14] != '5' {
		t.Fatalf("not a v5 UUID: %s", a)
	}
}

func TestPublishInsertsInCallerTxAndNotifies(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	l := pq.NewListener(dsn, time.Second, time.Second, nil)
	defer l.Close()
	if err := l.Listen("outbox_event"); err != nil {
		t.Fatal(err)
	}
	p := outbox.Default()
	ctx := context.Background()

	// Rolled back: nothing stays, nothing is notified.
	tx, _ := db.BeginTx(ctx, nil)
	if err := p.Publish(ctx, tx, good("rolled-back")); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback()

	tx, _ = db.BeginTx(ctx, nil)
	evs := []outbox.Event{good("e1"), good("e2")}
	evs[1].AggregateVersion = 2
	evs[1].MessageKey = "custom"
	if err := p.Publish(ctx, tx, evs...); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-l.Notify:
		if n == nil || n.Channel != "outbox_event" {
			t.Fatalf("notification %+v", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no NOTIFY after commit")
	}
	select {
	case n := <-l.Notify:
		t.Fatalf("second notification %+v (one per transaction expected)", n)
	case <-time.After(200 * time.Millisecond):
	}
	rows, err := db.Query(`SELECT event_id, message_key, status, event_version, payload::text, headers->>'traceparent' FROM outbox_event ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id, key, st, payload, tp string
		var ev int
		if err := rows.Scan(&id, &key, &st, &ev, &payload, &tp); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s/%s/%s/%d/%s/%s", id, key, st, ev, payload, tp))
	}
	want := []string{`e1/o-1/PENDING/1/{"amount": 10}/00-x`, `e2/custom/PENDING/1/{"amount": 10}/00-x`}
	if strings.Join(got, ";") != strings.Join(want, ";") {
		t.Fatalf("rows %v\nwant %v", got, want)
	}

	// Same stable id again (an application retry after an unknown commit): refused.
	tx, _ = db.BeginTx(ctx, nil)
	defer tx.Rollback() //nolint:errcheck
	if err := p.Publish(ctx, tx, good("e1")); err == nil {
		t.Fatal("duplicate event id accepted")
	}
}

func TestPublishRejectsWithoutInserting(t *testing.T) {
	_, db := relaytest.NewDB(t)
	ctx := context.Background()
	tx, _ := db.BeginTx(ctx, nil)
	defer tx.Rollback() //nolint:errcheck
	bad := good("b")
	bad.Payload = json.RawMessage(`nope`)
	err := outbox.Default().Publish(ctx, tx, good("a"), bad)
	if !errors.Is(err, outbox.ErrInvalidEvent) || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("err %v", err)
	}
	var n int
	_ = tx.QueryRow(`SELECT count(*) FROM outbox_event`).Scan(&n)
	if n != 0 {
		t.Fatal("rows inserted despite an invalid event")
	}
	if _, err := outbox.New("public", "Bad-Name"); err == nil {
		t.Fatal("bad table name accepted")
	}
	if err := outbox.Default().Publish(ctx, nil, good("x")); err == nil {
		t.Fatal("nil tx accepted")
	}
}

func TestPublishManyChunks(t *testing.T) {
	_, db := relaytest.NewDB(t)
	ctx := context.Background()
	var evs []outbox.Event
	for i := 0; i < 2500; i++ {
		e := good(fmt.Sprintf("e%d", i))
		e.AggregateID = fmt.Sprintf("a%d", i)
		evs = append(evs, e)
	}
	tx, _ := db.BeginTx(ctx, nil)
	if err := outbox.Default().Publish(ctx, tx, evs...); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if c := relaytest.CountStatus(t, db)["PENDING"]; c != 2500 {
		t.Fatalf("%d rows", c)
	}
}

// exampleDB is set by the example's setup (a private database).
func exampleDB() *sql.DB {
	dsn, err := relaytest.PG.CreateDatabase(context.Background(), "example")
	if err != nil {
		panic(err)
	}
	db, _ := sql.Open("postgres", dsn)
	_ = relaytest.MigrateDefault(db)
	_, _ = db.Exec(`CREATE TABLE orders (id text PRIMARY KEY, status text NOT NULL)`)
	_, _ = db.Exec(`INSERT INTO orders VALUES ('o-42', 'new')`)
	return db
}

// The business change and its event commit together, or not at all.
func ExamplePublisher_Publish() {
	db := exampleDB()
	defer db.Close()
	ctx := context.Background()
	pub := outbox.Default()

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if _, err := tx.ExecContext(ctx, `UPDATE orders SET status = 'paid' WHERE id = $1`, "o-42"); err != nil {
		panic(err)
	}
	err = pub.Publish(ctx, tx, outbox.Event{
		EventID:          outbox.EventID("order-paid", "o-42"), // stable across retries
		AggregateType:    "order",
		AggregateID:      "o-42",
		AggregateVersion: 2,
		EventType:        "order.paid",
		Destination:      "orders",
		Payload:          json.RawMessage(`{"orderId":"o-42","amount":1000}`),
	})
	if err != nil {
		panic(err)
	}
	if err := tx.Commit(); err != nil {
		panic(err)
	}

	var status, evStatus string
	_ = db.QueryRow(`SELECT status FROM orders WHERE id = 'o-42'`).Scan(&status)
	_ = db.QueryRow(`SELECT status FROM outbox_event WHERE aggregate_id = 'o-42'`).Scan(&evStatus)
	fmt.Println(status, evStatus)
	// Output: paid PENDING
}

// A payload column of another type than json or jsonb (bytea: the relay accepts it
// for producers that write bytes themselves) refuses Publish with PostgreSQL's type
// error, instead of storing the JSON text read as bytea escapes.
func TestPublishIntoABytePayloadColumnFailsWithTheType(t *testing.T) {
	_, db := relaytest.NewDB(t)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `ALTER TABLE outbox_event ALTER payload TYPE bytea USING convert_to(payload::text, 'UTF8')`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	e := good("bytes")
	e.Payload = json.RawMessage(`{"path":"C:\\tmp"}`)
	err = outbox.Default().Publish(ctx, tx, e)
	if err == nil || !strings.Contains(err.Error(), "bytea") {
		t.Fatalf("Publish into a bytea payload column: %v, want the type error", err)
	}
}
