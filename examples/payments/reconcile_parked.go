package payments

import (
	"context"
	"database/sql"
	"fmt"
	"sort"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/inbox"
)

// CodeCommandParked marks a ParkedResult that is a parked command (the dispatcher
// gave up on the SMS) rather than a parked message.
const CodeCommandParked = "command_parked"

// parkedIndex holds the parked results by consumer group and order.
type parkedIndex map[groupOrder][]ParkedResult

type groupOrder struct{ group, orderID string }

func (p parkedIndex) add(r ParkedResult) {
	k := groupOrder{r.Group, r.OrderID}
	p[k] = append(p[k], r)
}

// has reports whether group parked anything of the order: its result is then
// accounted for, though not there.
func (p parkedIndex) has(group, orderID string) bool { return len(p[groupOrder{group, orderID}]) > 0 }

func (p parkedIndex) results() []ParkedResult {
	var out []ParkedResult
	for _, rs := range p {
		out = append(out, rs...)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.OrderID != b.OrderID {
			return a.OrderID < b.OrderID
		}
		return a.EventID < b.EventID
	})
	return out
}

// loadParked reads the open parked messages of the example's groups, one result per
// (group, event, code). The parked row's aggregate id is the order id.
func loadParked(ctx context.Context, db *sql.DB, prefix string) (parkedIndex, error) {
	rows, err := db.QueryContext(ctx, `SELECT consumer_group, aggregate_id, event_id, error_code, count(*)
FROM `+Schema+`.`+inbox.ParkedTable+`
WHERE status = $1 AND consumer_group = ANY($2) AND starts_with(aggregate_id, $3)
GROUP BY 1, 2, 3, 4`, inbox.ParkedOpen, pq.Array(AllGroups), prefix)
	if err != nil {
		return nil, fmt.Errorf("payments: reconcile: read parked messages: %w", err)
	}
	defer rows.Close()
	idx := parkedIndex{}
	for rows.Next() {
		var r ParkedResult
		if err := rows.Scan(&r.Group, &r.OrderID, &r.EventID, &r.Code, &r.Messages); err != nil {
			return nil, fmt.Errorf("payments: reconcile: read parked messages: %w", err)
		}
		idx.add(r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("payments: reconcile: read parked messages: %w", err)
	}
	return idx, nil
}
