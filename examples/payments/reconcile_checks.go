package payments

import (
	"context"
	"fmt"

	"github.com/outbox-operator/outbox-operator/inbox"
)

// checkPoints: one ledger row per PAID order, none for any other.
func (rc *reconciler) checkPoints(ctx context.Context) error {
	credits, err := rc.countBy(ctx, `SELECT order_id, count(*) FROM payments.points_ledger
WHERE starts_with(order_id, $1) GROUP BY order_id`)
	if err != nil {
		return fmt.Errorf("payments: reconcile points: %w", err)
	}
	for id, n := range credits {
		if _, ok := rc.orders[id]; !ok {
			rc.mismatch("points", id, "%d points credits for an unknown order", n)
		}
	}
	for id, o := range rc.orders {
		n := credits[id]
		switch {
		case o.status != "PAID":
			if n > 0 {
				rc.mismatch("points", id, "%d points credits for a %s order", n, o.status)
			}
		case n == 1:
		case n == 0 && rc.parked.has(GroupPoints, id):
		case n == 0:
			rc.mismatch("points", id, "no points credit")
		default:
			rc.mismatch("points", id, "%d points credits, want 1", n)
		}
	}
	return nil
}

// checkBalances: every balance of the orders' users is the sum of its ledger.
func (rc *reconciler) checkBalances(ctx context.Context) error {
	rows, err := rc.db.QueryContext(ctx, `WITH ledger AS (
    SELECT user_id, sum(points) AS points FROM payments.points_ledger GROUP BY user_id
)
SELECT user_id, coalesce(u.balance, 0), coalesce(l.points, 0)
FROM payments.user_points u FULL JOIN ledger l USING (user_id)
WHERE user_id IN (SELECT user_id FROM payments.orders WHERE starts_with(order_id, $1))
  AND coalesce(u.balance, 0) <> coalesce(l.points, 0)`, rc.o.OrderPrefix)
	if err != nil {
		return fmt.Errorf("payments: reconcile balances: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var user string
		var balance, ledger int64
		if err := rows.Scan(&user, &balance, &ledger); err != nil {
			return fmt.Errorf("payments: reconcile balances: %w", err)
		}
		rc.mismatch("points", "", "user %s: balance %d, ledger %d", user, balance, ledger)
	}
	return rows.Err()
}

// checkSMS: one DONE send-sms command per PAID order, keyed by its event id, and
// (with Deliveries) one SMS sent for that key.
func (rc *reconciler) checkSMS(ctx context.Context) error {
	status, err := rc.commandStatus(ctx)
	if err != nil {
		return fmt.Errorf("payments: reconcile sms: %w", err)
	}
	matched := 0
	for id, o := range rc.orders {
		key := o.eventID(id)
		if key == "" {
			continue
		}
		st, ok := status[key]
		if ok {
			matched++
		}
		rc.checkCommand(id, key, st, ok)
	}
	if rc.o.OrderPrefix == "" && matched != len(status) {
		// Keys are event ids, not order ids: only an unscoped check can tell.
		rc.mismatch("sms", "", "%d SMS commands belong to no PAID order", len(status)-matched)
	}
	return nil
}

func (rc *reconciler) checkCommand(orderID, key, status string, exists bool) {
	switch {
	case !exists && rc.parked.has(GroupNotification, orderID):
	case !exists:
		rc.mismatch("sms", orderID, "no SMS command")
	case status == inbox.CommandParked:
		rc.parked.add(ParkedResult{Group: GroupNotification, OrderID: orderID, EventID: key, Code: CodeCommandParked})
	case status != inbox.CommandDone:
		rc.mismatch("sms", orderID, "SMS command is %s, not %s", status, inbox.CommandDone)
	case rc.o.Deliveries != nil && rc.o.Deliveries.SentFor(key) != 1:
		rc.mismatch("sms", orderID, "%d SMS sent for its key, want 1", rc.o.Deliveries.SentFor(key))
	}
}

// commandStatus maps each send-sms command's idempotency key to its status.
func (rc *reconciler) commandStatus(ctx context.Context) (map[string]string, error) {
	rows, err := rc.db.QueryContext(ctx, `SELECT idempotency_key, status FROM payments.`+inbox.CommandTable+`
WHERE consumer_group = $1 AND kind = $2`, GroupNotification, KindSMS)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var key, st string
		if err := rows.Scan(&key, &st); err != nil {
			return nil, err
		}
		out[key] = st
	}
	return out, rows.Err()
}

// checkSearch: one search row per order, at the order's version and status.
func (rc *reconciler) checkSearch(ctx context.Context) error {
	rows, err := rc.db.QueryContext(ctx, `SELECT order_id, status, last_applied_version FROM payments.order_search
WHERE starts_with(order_id, $1)`, rc.o.OrderPrefix)
	if err != nil {
		return fmt.Errorf("payments: reconcile search: %w", err)
	}
	defer rows.Close()
	seen := map[string]bool{}
	for rows.Next() {
		var id, st string
		var v int64
		if err := rows.Scan(&id, &st, &v); err != nil {
			return fmt.Errorf("payments: reconcile search: %w", err)
		}
		seen[id] = true
		o, ok := rc.orders[id]
		switch {
		case !ok:
			rc.mismatch("search", id, "search row for an unknown order")
		case (v != o.version || st != o.status) && !rc.parked.has(GroupSearch, id):
			rc.mismatch("search", id, "search row at version %d (%s), order at version %d (%s)", v, st, o.version, o.status)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("payments: reconcile search: %w", err)
	}
	for id := range rc.orders {
		if !seen[id] && !rc.parked.has(GroupSearch, id) {
			rc.mismatch("search", id, "no search row")
		}
	}
	return nil
}

// countBy runs a "key, count" query with the order prefix as $1.
func (rc *reconciler) countBy(ctx context.Context, query string) (map[string]int, error) {
	rows, err := rc.db.QueryContext(ctx, query, rc.o.OrderPrefix)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, rows.Err()
}
