// trace_aggregate_v2.go: `kubectl outbox trace --aggregate` on a table of contract v2
// (docs/contract-v2.md, "As built: replay, trace and the status view"). The rows come
// from the <table>_status view with the same batch log walk as the trace of one
// event, and are printed in v1's table: ATTEMPTS and LAST ERROR are the hold row's,
// SENT is when the batch that published the event was logged.

package plugin

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// aggregateRowsV2 lists the newest limit versions of aggregate typ/id of the v2 table
// t, in version order, shaped as v1's rows.
func aggregateRowsV2(ctx context.Context, tx *sql.Tx, t pgident.Table, typ, id string, limit int) ([]eventRow, error) {
	if err := hasStatusView(ctx, tx, t); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, traceV2AggregateSQL(t), typ, id, limit)
	if err != nil {
		return nil, fmt.Errorf("read aggregate %s/%s from %s: %w", typ, id, t, err)
	}
	defer rows.Close()
	var out []eventRow
	for rows.Next() {
		var r v2Row
		if err := rows.Scan(r.targets()...); err != nil {
			return nil, fmt.Errorf("read aggregate %s/%s from %s: %w", typ, id, t, err)
		}
		out = append(out, r.asEventRow())
	}
	return out, rows.Err()
}

// asEventRow carries what renderAggregate prints: the hold row's attempts and error
// code (never its message: the status view has none), and the batch's time as sent.
func (r *v2Row) asEventRow() eventRow {
	return eventRow{EventID: r.EventID, AggregateType: r.AggregateType, AggregateID: r.AggregateID,
		AggregateVersion: r.AggregateVersion, EventType: r.EventType, Destination: r.Destination,
		MessageKey: r.MessageKey, Status: r.Status, RetryCount: r.Attempts, LastErrorCode: r.LastErrorCode,
		CreatedAt: r.CreatedAt, SentAt: r.BatchAt}
}
