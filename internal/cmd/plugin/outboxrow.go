package plugin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// eventRow is one outbox (or archive) row, without payload and headers: a trace is
// for finding where an event is, and payloads may hold personal data.
type eventRow struct {
	EventID, AggregateType, AggregateID string
	AggregateVersion                    int64
	EventType                           string
	EventVersion                        int64
	Destination, MessageKey, Status     string
	OwnerToken                          sql.NullString
	LeaseUntil                          sql.NullTime
	RetryCount                          int64
	NextRetryAt                         time.Time
	LastErrorCode, LastErrorMessage     sql.NullString
	CreatedAt                           time.Time
	SentAt                              sql.NullTime
	UpdatedAt                           time.Time
	BrokerPartition                     sql.NullInt64
	BrokerOffset                        sql.NullInt64
	// ArchivedAt is set for a row read from <table>_archive.
	ArchivedAt sql.NullTime
}

// rowColumns are the columns eventRow scans, in scan order.
var rowColumns = strings.Join([]string{
	"event_id", "aggregate_type", "aggregate_id", "aggregate_version", "event_type", "event_version",
	"destination", "message_key", "status", "owner_token", "lease_until", "retry_count", "next_retry_at",
	"last_error_code", "last_error_message", "created_at", "sent_at", "updated_at",
	"broker_partition", "broker_offset",
}, ", ")

func (r *eventRow) targets() []any {
	return []any{&r.EventID, &r.AggregateType, &r.AggregateID, &r.AggregateVersion, &r.EventType, &r.EventVersion,
		&r.Destination, &r.MessageKey, &r.Status, &r.OwnerToken, &r.LeaseUntil, &r.RetryCount, &r.NextRetryAt,
		&r.LastErrorCode, &r.LastErrorMessage, &r.CreatedAt, &r.SentAt, &r.UpdatedAt,
		&r.BrokerPartition, &r.BrokerOffset}
}

// errTableMissing is the outbox table not existing in the pipeline's database.
var errTableMissing = errors.New("table missing")

// mustExist is errTableMissing when t does not exist.
func mustExist(ctx context.Context, tx *sql.Tx, t pgident.Table) error {
	ok, err := exists(ctx, tx, t)
	if err != nil {
		return err
	}
	if !ok {
		return errTableMissing
	}
	return nil
}

// findEvent reads the event's row by primary key; nil when there is none.
func findEvent(ctx context.Context, tx *sql.Tx, t pgident.Table, id string) (*eventRow, error) {
	if err := mustExist(ctx, tx, t); err != nil {
		return nil, err
	}
	var r eventRow
	err := tx.QueryRowContext(ctx, `SELECT `+rowColumns+` FROM `+t.Qualified()+` WHERE event_id = $1`, id).Scan(r.targets()...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read event %q from %s: %w", id, t, err)
	}
	return &r, nil
}

// findArchived reads the event from <table>_archive (indexed on event_id); nil when
// it is not there or there is no archive table (Delete-mode retention, or never
// migrated). The newest copy wins should a replayed event have been archived twice.
func findArchived(ctx context.Context, tx *sql.Tx, t pgident.Table, id string) (*eventRow, error) {
	at := t.WithSuffix(schema.ArchiveSuffix)
	ok, err := exists(ctx, tx, at)
	if err != nil || !ok {
		return nil, err
	}
	var r eventRow
	err = tx.QueryRowContext(ctx, `SELECT `+rowColumns+`, archived_at FROM `+at.Qualified()+
		` WHERE event_id = $1 ORDER BY archived_at DESC LIMIT 1`, id).Scan(append(r.targets(), &r.ArchivedAt)...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read event %q from %s: %w", id, at, err)
	}
	return &r, nil
}

// aggregateListing is what trace --aggregate found in one pipeline's table.
type aggregateListing struct {
	rows []eventRow // the table's newest versions, in version order
	v2   bool       // the table follows contract v2 (rows come from its status view)
	// history holds, on a v2 table, the older versions from the v1 history an
	// upgrade moved aside, in version order (trace_history.go).
	history []eventRow
}

func (l aggregateListing) len() int { return len(l.rows) + len(l.history) }

// aggregateRows lists an aggregate's newest versions (at most limit) in version order,
// through the unique (aggregate_type, aggregate_id, aggregate_version) index.
func aggregateRows(ctx context.Context, tx *sql.Tx, t pgident.Table, typ, id string, limit int) (aggregateListing, error) {
	var l aggregateListing
	if err := mustExist(ctx, tx, t); err != nil {
		return l, err
	}
	c, err := schema.DetectContractTx(ctx, tx, t)
	if err != nil {
		return l, err
	}
	if c.Version != schema.ContractV2 {
		l.rows, err = aggregateRowsV1(ctx, tx, t, typ, id, math.MaxInt64, limit)
		return l, err
	}
	l.v2 = true
	if l.rows, err = aggregateRowsV2(ctx, tx, t, typ, id, limit); err != nil {
		return l, err
	}
	l.history, err = aggregateHistory(ctx, tx, t, typ, id, l.rows, limit)
	return l, err
}

// aggregateRowsV1 is aggregateRows of a v1 table (or of the v1 table an upgrade moved
// aside), of the versions below below.
func aggregateRowsV1(ctx context.Context, tx *sql.Tx, t pgident.Table, typ, id string, below int64, limit int) ([]eventRow, error) {
	rows, err := tx.QueryContext(ctx, `SELECT * FROM (SELECT `+rowColumns+` FROM `+t.Qualified()+
		` WHERE aggregate_type = $1 AND aggregate_id = $2 AND aggregate_version < $3
		ORDER BY aggregate_version DESC LIMIT $4) newest
		ORDER BY aggregate_version`, typ, id, below, limit)
	if err != nil {
		return nil, fmt.Errorf("read aggregate %s/%s from %s: %w", typ, id, t, err)
	}
	defer rows.Close()
	var out []eventRow
	for rows.Next() {
		var r eventRow
		if err := rows.Scan(r.targets()...); err != nil {
			return nil, fmt.Errorf("read aggregate %s/%s from %s: %w", typ, id, t, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
