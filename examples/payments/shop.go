package payments

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/outbox-operator/outbox-operator/outbox"
)

// Shop is the producer: it owns payments.orders and writes each change of an order
// and its event in one local transaction.
type Shop struct {
	db    *sql.DB
	pub   *outbox.Publisher
	topic string
}

// NewShop returns a Shop that publishes to topic through pub's outbox table.
func NewShop(db *sql.DB, pub *outbox.Publisher, topic string) *Shop {
	return &Shop{db: db, pub: pub, topic: topic}
}

// Order is a new order.
type Order struct {
	OrderID, UserID string
	AmountCents     int64
	Currency, Phone string
}

// PlaceOrder inserts a PENDING order (version 1) and its OrderPlaced event.
func (s *Shop) PlaceOrder(ctx context.Context, o Order) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO payments.orders
    (order_id, user_id, amount_cents, currency, phone, status, version) VALUES ($1, $2, $3, $4, $5, 'PENDING', 1)`,
			o.OrderID, o.UserID, o.AmountCents, o.Currency, o.Phone); err != nil {
			return fmt.Errorf("insert order %s: %w", o.OrderID, err)
		}
		st := OrderState{OrderID: o.OrderID, UserID: o.UserID, AmountCents: o.AmountCents, Currency: o.Currency, Status: "PENDING"}
		return s.publish(ctx, tx, OrderPlacedID(o.OrderID), EventOrderPlaced, o.OrderID, 1, st)
	})
}

func (s *Shop) publish(ctx context.Context, tx *sql.Tx, id, typ, orderID string, version int64, payload any) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("encode %s of order %s: %w", typ, orderID, err)
	}
	err = s.pub.Publish(ctx, tx, outbox.Event{
		EventID: id, EventType: typ, Destination: s.topic, Payload: b,
		AggregateType: AggregateOrder, AggregateID: orderID, AggregateVersion: version,
	})
	if err != nil {
		return fmt.Errorf("publish %s of order %s: %w", typ, orderID, err)
	}
	return nil
}

// inTx runs fn in a transaction and commits it if fn succeeded. fn's errors say
// what failed already, and are returned as they are (callers match on them).
func (s *Shop) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("payments: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("payments: commit: %w", err)
	}
	return nil
}
