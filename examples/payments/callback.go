package payments

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// PaymentCallback is what the payment provider tells the shop: this payment of this
// order succeeded. Providers retry callbacks until they get an answer, so the same
// callback may arrive several times, and concurrently.
type PaymentCallback struct {
	OrderID, PaymentID string
}

// CallbackResult says what a callback did.
type CallbackResult int

const (
	// Paid: the order went PENDING -> PAID and its PaymentSucceeded event was written.
	Paid CallbackResult = iota + 1
	// AlreadyPaid: a repeat of a callback that was applied before; nothing changed.
	AlreadyPaid
)

// Callback errors. Neither changes anything.
var (
	ErrUnknownOrder = errors.New("payments: unknown order")
	// ErrPaidByOtherPayment: the order was paid by another payment (a double charge;
	// the provider must refund this one). Not a retry of the first callback.
	ErrPaidByOtherPayment = errors.New("payments: order already paid by another payment")
)

// HandlePaymentCallback marks the order PAID and writes its PaymentSucceeded event in
// ONE transaction: the event exists if and only if the order is PAID. The UPDATE is
// conditional (status = 'PENDING'), so a repeated or concurrent callback changes
// nothing and writes no second event: the loser blocks on the row lock, then finds
// the order PAID. It returns once the transaction committed; points, the SMS and
// search follow from the event, and the callback never waits for them.
func (s *Shop) HandlePaymentCallback(ctx context.Context, cb PaymentCallback) (CallbackResult, error) {
	res := Paid
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		ev := PaymentSucceeded{PaymentID: cb.PaymentID}
		var version int64
		err := tx.QueryRowContext(ctx, `UPDATE payments.orders
SET status = 'PAID', version = version + 1, payment_id = $2, paid_at = now()
WHERE order_id = $1 AND status = 'PENDING'
RETURNING user_id, amount_cents, currency, phone, version`, cb.OrderID, cb.PaymentID).
			Scan(&ev.UserID, &ev.AmountCents, &ev.Currency, &ev.Phone, &version)
		if errors.Is(err, sql.ErrNoRows) {
			res = AlreadyPaid
			return s.checkPaid(ctx, tx, cb)
		}
		if err != nil {
			return fmt.Errorf("mark order %s paid: %w", cb.OrderID, err)
		}
		ev.OrderID, ev.Status = cb.OrderID, "PAID"
		return s.publish(ctx, tx, PaymentSucceededID(cb.OrderID, cb.PaymentID), EventPaymentSucceeded, cb.OrderID, version, ev)
	})
	if err != nil {
		return 0, err
	}
	return res, nil
}

// checkPaid explains why the conditional UPDATE changed nothing.
func (s *Shop) checkPaid(ctx context.Context, tx *sql.Tx, cb PaymentCallback) error {
	var status string
	var paymentID sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT status, payment_id FROM payments.orders WHERE order_id = $1`, cb.OrderID).
		Scan(&status, &paymentID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w %s", ErrUnknownOrder, cb.OrderID)
	case err != nil:
		return fmt.Errorf("read order %s: %w", cb.OrderID, err)
	case paymentID.String != cb.PaymentID:
		return fmt.Errorf("%w: order %s", ErrPaidByOtherPayment, cb.OrderID)
	}
	return nil // PAID by this very payment: a repeated callback
}
