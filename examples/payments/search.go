package payments

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outbox-operator/outbox-operator/inbox"
)

// GroupSearch is the consumer group of the search projection.
const GroupSearch = "search"

// HandleSearch writes the order's state into its search row. Every event of the
// order carries the whole state, so one upsert serves them all.
//
// The inbox Store already turns an older or equal version into Stale (the handler
// does not run). The row keeps its own guard, last_applied_version, as well: the
// Store's version is per consumer group, the row is shared by whatever writes it. A
// rebuild that replays the topic into a new consumer group, or a replay of a parked
// old version, must not move a row backwards either.
func HandleSearch(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
	if m.EventType != EventOrderPlaced && m.EventType != EventPaymentSucceeded {
		return "", nil
	}
	var st OrderState
	if err := decode(m, &st); err != nil {
		return "", err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO payments.order_search AS s
    (order_id, user_id, status, amount_cents, currency, last_applied_version) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (order_id) DO UPDATE
SET user_id = EXCLUDED.user_id, status = EXCLUDED.status, amount_cents = EXCLUDED.amount_cents,
    currency = EXCLUDED.currency, last_applied_version = EXCLUDED.last_applied_version, updated_at = now()
WHERE s.last_applied_version < EXCLUDED.last_applied_version`,
		st.OrderID, st.UserID, st.Status, st.AmountCents, st.Currency, m.AggregateVersion)
	if err != nil {
		return "", fmt.Errorf("search: project order %s: %w", st.OrderID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return "stale-row", nil // the row is newer already: a no-op, not an error
	}
	return "", nil
}
