package payments

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
)

// Report is what Reconcile found. Mismatches are derived results that are missing,
// doubled or behind; Parked are results that are missing for a stated reason (a
// parked message or command) and wait for a person.
type Report struct {
	Orders, Paid int
	Parked       []ParkedResult
	Mismatches   []Mismatch
}

// OK reports whether every derived result is there exactly once or parked.
func (r Report) OK() bool { return len(r.Mismatches) == 0 }

// Mismatch is one derived result that is not what the orders table says it must be.
type Mismatch struct {
	Check   string // "points", "sms" or "search"
	OrderID string
	Detail  string
}

// ParkedResult is an event a consumer group parked (or a command it parked).
type ParkedResult struct {
	Group, OrderID, EventID, Code string
	Messages                      int // parked rows of this event (inbox merges redeliveries into one)
}

// DeliveryLog is the SMS provider's delivery report: how many SMS went out for an
// idempotency key.
type DeliveryLog interface {
	SentFor(key string) int
}

// ReconcileOptions scope and extend Reconcile.
type ReconcileOptions struct {
	// OrderPrefix limits the check to orders whose id starts with it ("": all).
	OrderPrefix string
	// Deliveries, if set, is checked too: one SMS sent per PAID order.
	Deliveries DeliveryLog
}

// Reconcile compares every derived result with the orders table, the source of
// truth: for each PAID order exactly one points credit (and balances equal to their
// ledgers), one DONE SMS command (and one SMS sent, with Deliveries), and a search
// row at the order's version; nothing derived for a PENDING order beyond its search
// row. It reads, never repairs. The consumers are asynchronous: run it once they
// caught up, or poll it until OK.
func Reconcile(ctx context.Context, db *sql.DB, o ReconcileOptions) (Report, error) {
	orders, err := loadOrders(ctx, db, o.OrderPrefix)
	if err != nil {
		return Report{}, err
	}
	parked, err := loadParked(ctx, db, o.OrderPrefix)
	if err != nil {
		return Report{}, err
	}
	rc := &reconciler{db: db, o: o, orders: orders, parked: parked}
	rc.report.Orders = len(orders)
	for _, ord := range orders {
		if ord.status == "PAID" {
			rc.report.Paid++
		}
	}
	for _, check := range []func(context.Context) error{rc.checkPoints, rc.checkBalances, rc.checkSMS, rc.checkSearch} {
		if err := check(ctx); err != nil {
			return Report{}, err
		}
	}
	rc.report.Parked = parked.results()
	sort.Slice(rc.report.Mismatches, func(i, j int) bool {
		a, b := rc.report.Mismatches[i], rc.report.Mismatches[j]
		return a.Check < b.Check || a.Check == b.Check && a.OrderID < b.OrderID
	})
	return rc.report, nil
}

type reconciler struct {
	db     *sql.DB
	o      ReconcileOptions
	orders map[string]orderRow
	parked parkedIndex
	report Report
}

func (rc *reconciler) mismatch(check, orderID, format string, args ...any) {
	rc.report.Mismatches = append(rc.report.Mismatches, Mismatch{Check: check, OrderID: orderID, Detail: fmt.Sprintf(format, args...)})
}

// orderRow is the source of truth for one order.
type orderRow struct {
	status    string
	version   int64
	paymentID string
}

// eventID is the PaymentSucceeded id of a PAID order ("" otherwise).
func (o orderRow) eventID(orderID string) string {
	if o.status != "PAID" {
		return ""
	}
	return PaymentSucceededID(orderID, o.paymentID)
}

func loadOrders(ctx context.Context, db *sql.DB, prefix string) (map[string]orderRow, error) {
	rows, err := db.QueryContext(ctx, `SELECT order_id, status, version, coalesce(payment_id, '')
FROM payments.orders WHERE starts_with(order_id, $1)`, prefix)
	if err != nil {
		return nil, fmt.Errorf("payments: reconcile: read orders: %w", err)
	}
	defer rows.Close()
	out := map[string]orderRow{}
	for rows.Next() {
		var id string
		var o orderRow
		if err := rows.Scan(&id, &o.status, &o.version, &o.paymentID); err != nil {
			return nil, fmt.Errorf("payments: reconcile: read orders: %w", err)
		}
		out[id] = o
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("payments: reconcile: read orders: %w", err)
	}
	return out, nil
}

// String is the report for people: counts, parked results, then mismatches.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "orders %d, paid %d, parked %d, mismatches %d\n", r.Orders, r.Paid, len(r.Parked), len(r.Mismatches))
	for _, p := range r.Parked {
		fmt.Fprintf(&b, "  parked   group=%s order=%s event=%s code=%s messages=%d\n", p.Group, p.OrderID, p.EventID, p.Code, p.Messages)
	}
	for _, m := range r.Mismatches {
		fmt.Fprintf(&b, "  mismatch check=%s order=%s: %s\n", m.Check, m.OrderID, m.Detail)
	}
	return b.String()
}
