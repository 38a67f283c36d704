package payments_test

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/examples/payments"
	"github.com/outbox-operator/outbox-operator/inbox"
	"github.com/outbox-operator/outbox-operator/outbox"
)

// TestReconcileFindsEveryKindOfMismatch: the real handlers build every derived result
// (through inbox.Store.Handle, straight from the outbox table: no broker needed),
// Reconcile finds nothing wrong, then one result per order is broken on purpose and
// Reconcile names each, and nothing for the order left intact.
func TestReconcileFindsEveryKindOfMismatch(t *testing.T) {
	s := &stack{logs: &logBuffer{}}
	s.dsn, s.db = srv.OpenDatabase(t)
	s.relayworker(t, "migrate")
	ctx := context.Background()
	if err := payments.Migrate(ctx, s.db); err != nil {
		t.Fatal(err)
	}
	shop := payments.NewShop(s.db, outbox.Default(), topic)
	for i := range 7 {
		if err := shop.PlaceOrder(ctx, order(i+1)); err != nil { // order(0) is the poison
			t.Fatal(err)
		}
	}
	pay(t, shop, 1, 6) // orders 1-5 PAID, 6 and 7 PENDING
	notify := handleOutbox(t, s.db)
	gw := &payments.FakeGateway{}
	sendAll(t, s.db, notify, gw)
	if rep := reconcile(t, s, gw); !rep.OK() || rep.Paid != 5 || rep.Orders != 7 {
		t.Fatalf("before breaking anything:\n%s", rep)
	}

	id := func(i int) string { return order(i).OrderID }
	key := func(i int) string { return payments.PaymentSucceededID(id(i), paymentID(i)) }
	for _, stmt := range []string{
		credit(id(1), order(1).UserID), // a double credit (balance kept equal to the ledger)
		`DELETE FROM payments.message_command WHERE idempotency_key = '` + key(2) + `'`,
		`UPDATE payments.order_search SET last_applied_version = 1, status = 'PENDING' WHERE order_id = '` + id(3) + `'`,
		`UPDATE payments.message_command SET status = 'PENDING' WHERE idempotency_key = '` + key(4) + `'`,
		credit(id(6), order(6).UserID),                                           // points for an unpaid order
		`INSERT INTO payments.user_points VALUES ('` + order(7).UserID + `', 7)`, // a balance without a ledger
	} {
		if _, err := s.db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	rep, err := payments.Reconcile(ctx, s.db, payments.ReconcileOptions{Deliveries: doubled{gw, key(5)}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range rep.Mismatches {
		got = append(got, m.Check+" "+m.OrderID+": "+m.Detail)
	}
	want := []string{
		"points : user " + order(7).UserID + ": balance 7, ledger 0",
		"points " + id(1) + ": 2 points credits, want 1",
		"points " + id(6) + ": 1 points credits for a PENDING order",
		"search " + id(3) + ": search row at version 1 (PENDING), order at version 2 (PAID)",
		"sms " + id(2) + ": no SMS command",
		"sms " + id(4) + ": SMS command is PENDING, not DONE",
		"sms " + id(5) + ": 2 SMS sent for its key, want 1",
	}
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("mismatches:\n%q\nwant:\n%q", got, want)
	}
}

// credit is a points credit made behind the inbox's back.
func credit(orderID, userID string) string {
	return fmt.Sprintf(`WITH l AS (INSERT INTO payments.points_ledger (order_id, user_id, event_id, points)
VALUES ('%s', '%s', 'forged', 5) RETURNING user_id, points)
INSERT INTO payments.user_points AS u SELECT user_id, points FROM l
ON CONFLICT (user_id) DO UPDATE SET balance = u.balance + EXCLUDED.balance`, orderID, userID)
}

// doubled is a delivery report that says one key got two SMS.
type doubled struct {
	payments.DeliveryLog
	key string
}

func (d doubled) SentFor(key string) int {
	if key == d.key {
		return 2
	}
	return d.DeliveryLog.SentFor(key)
}

// handleOutbox hands every outbox row, as the relay would publish it, to the three
// groups' handlers through their inbox Stores.
func handleOutbox(t *testing.T, db *sql.DB) *payments.Notification {
	t.Helper()
	notify, err := payments.NewNotification(db)
	if err != nil {
		t.Fatal(err)
	}
	handlers := map[string]inbox.HandlerFunc{payments.GroupPoints: payments.HandlePoints,
		payments.GroupNotification: notify.Handle, payments.GroupSearch: payments.HandleSearch}
	rows, err := db.Query(`SELECT event_id, event_type, event_version, aggregate_type, aggregate_id, aggregate_version, payload::text
FROM public.outbox_event ORDER BY aggregate_id, aggregate_version`)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []inbox.Message
	for rows.Next() {
		var m inbox.Message
		var payload string
		if err := rows.Scan(&m.EventID, &m.EventType, &m.EventVersion, &m.AggregateType, &m.AggregateID, &m.AggregateVersion, &payload); err != nil {
			t.Fatal(err)
		}
		m.Payload = []byte(payload)
		msgs = append(msgs, m)
	}
	rows.Close()
	for g, fn := range handlers {
		st, err := inbox.New(db, payments.Schema, g)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if out, err := st.Handle(context.Background(), m, fn); err != nil || out != inbox.Applied {
				t.Fatalf("group %s, event %s: %v, %v", g, m.EventID, out, err)
			}
		}
	}
	return notify
}

// sendAll runs the SMS dispatcher until no command is left to send.
func sendAll(t *testing.T, db *sql.DB, notify *payments.Notification, gw *payments.FakeGateway) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- notify.Dispatch(ctx, gw, inbox.DispatchOptions{Poll: 10 * time.Millisecond}) }()
	defer func() { cancel(); <-done }()
	eventually(t, 30*time.Second, "every SMS sent", func() string {
		var open int
		if err := db.QueryRow(`SELECT count(*) FROM payments.message_command WHERE status <> 'DONE'`).Scan(&open); err != nil {
			return err.Error()
		}
		if open > 0 {
			return fmt.Sprintf("%d commands not DONE", open)
		}
		return ""
	})
}
