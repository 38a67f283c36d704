package payments

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/outbox-operator/outbox-operator/inbox"
)

// GroupPoints is the consumer group of the points service.
const GroupPoints = "points"

// pointsCurrencies are the currencies the points programme knows; one point per whole
// unit.
var pointsCurrencies = map[string]bool{"EUR": true, "USD": true, "GBP": true}

// errNotInProgramme is why a payment earns no points. It is Permanent: no retry
// makes the currency known, so the message is parked for a person (or a later
// replay, once the programme knows it) and the partition moves on.
var errNotInProgramme = errors.New("points: the currency of this payment is not in the points programme")

// HandlePoints credits the user of a PaymentSucceeded event, in the inbox's
// transaction: the ledger row, the balance and the dedup row commit together, so a
// redelivery finds the dedup row and credits nothing. Other events of the order are
// no business of the points service.
func HandlePoints(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
	if m.EventType != EventPaymentSucceeded {
		return "", nil
	}
	var ev PaymentSucceeded
	if err := decode(m, &ev); err != nil {
		return "", err
	}
	if !pointsCurrencies[ev.Currency] || ev.AmountCents <= 0 {
		return "", inbox.Permanent(errNotInProgramme)
	}
	var creditID int64
	err := tx.QueryRowContext(ctx, `WITH credit AS (
    INSERT INTO payments.points_ledger (order_id, user_id, event_id, points) VALUES ($1, $2, $3, $4)
    RETURNING credit_id, user_id, points
), balance AS (
    INSERT INTO payments.user_points AS u (user_id, balance) SELECT user_id, points FROM credit
    ON CONFLICT (user_id) DO UPDATE SET balance = u.balance + EXCLUDED.balance, updated_at = now()
)
SELECT credit_id FROM credit`, ev.OrderID, ev.UserID, m.EventID, ev.AmountCents/100).Scan(&creditID)
	if err != nil {
		return "", fmt.Errorf("points: credit order %s: %w", ev.OrderID, err) // retryable
	}
	return "credit:" + strconv.FormatInt(creditID, 10), nil
}
