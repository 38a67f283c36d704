package plugin

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// consumeRow is one consumer group's dedup row for the event (message_consume).
type consumeRow struct {
	Group, Status          string
	FirstReceived, Updated time.Time
}

// parkedRow is one parked delivery of the event (message_consume_parked).
type parkedRow struct {
	Group, Topic, ErrorCode, Status string
	Partition                       int64
	Offset, Attempts                int64
	LastSeen                        time.Time
}

// consumerTrace is what one consumer database knows about the event.
type consumerTrace struct {
	src      dsnSource
	schema   string
	consumed []consumeRow
	parked   []parkedRow
	// missing lists consumer tables that do not exist in that database.
	missing []string
}

// perGroup finds an event's rows in a table keyed by (consumer_group, event_id, ...)
// without scanning it: the dedup log has no index on event_id alone and can hold
// millions of rows, so this walks the few distinct groups down the leading index
// column (a loose index scan: one probe per group) and probes (group, event_id).
func perGroup(table, cols string) string {
	return `WITH RECURSIVE g(grp) AS (
    (SELECT consumer_group FROM ` + table + ` ORDER BY consumer_group LIMIT 1)
    UNION ALL
    SELECT (SELECT consumer_group FROM ` + table + ` WHERE consumer_group > g.grp ORDER BY consumer_group LIMIT 1)
    FROM g WHERE g.grp IS NOT NULL
)
SELECT ` + cols + ` FROM g JOIN ` + table + ` t ON t.consumer_group = g.grp AND t.event_id = $1
ORDER BY t.consumer_group`
}

func traceConsumer(ctx context.Context, tx *sql.Tx, schemaName, id string) (consumerTrace, error) {
	ct := consumerTrace{schema: schemaName}
	consume := pgident.Table{Schema: schemaName, Name: schema.ConsumeTable}
	parked := pgident.Table{Schema: schemaName, Name: schema.ParkedTable}
	haveConsume, err := exists(ctx, tx, consume)
	if err != nil {
		return ct, err
	}
	haveParked, err := exists(ctx, tx, parked)
	if err != nil {
		return ct, err
	}
	if haveConsume {
		if ct.consumed, err = consumedBy(ctx, tx, consume, id); err != nil {
			return ct, err
		}
	} else {
		ct.missing = append(ct.missing, consume.String())
	}
	if haveParked {
		ct.parked, err = parkedBy(ctx, tx, parked, id)
	} else {
		ct.missing = append(ct.missing, parked.String())
	}
	return ct, err
}

func consumedBy(ctx context.Context, tx *sql.Tx, t pgident.Table, id string) ([]consumeRow, error) {
	rows, err := tx.QueryContext(ctx, perGroup(t.Qualified(), `t.consumer_group, t.status, t.first_received_at, t.updated_at`), id)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t, err)
	}
	defer rows.Close()
	var out []consumeRow
	for rows.Next() {
		var r consumeRow
		if err := rows.Scan(&r.Group, &r.Status, &r.FirstReceived, &r.Updated); err != nil {
			return nil, fmt.Errorf("read %s: %w", t, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func parkedBy(ctx context.Context, tx *sql.Tx, t pgident.Table, id string) ([]parkedRow, error) {
	rows, err := tx.QueryContext(ctx, perGroup(t.Qualified(),
		`t.consumer_group, t.topic, t.kafka_partition, t.kafka_offset, t.error_code, t.attempts, t.status, t.last_seen_at`), id)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t, err)
	}
	defer rows.Close()
	var out []parkedRow
	for rows.Next() {
		var r parkedRow
		if err := rows.Scan(&r.Group, &r.Topic, &r.Partition, &r.Offset, &r.ErrorCode, &r.Attempts, &r.Status, &r.LastSeen); err != nil {
			return nil, fmt.Errorf("read %s: %w", t, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
