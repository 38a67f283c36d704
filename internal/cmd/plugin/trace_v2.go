// trace_v2.go: `kubectl outbox trace` of an event in a table of contract v2
// (docs/contract-v2.md, "As built: replay, trace and the status view"). A v2 row has
// no status or broker columns: the status comes from the <table>_status view (the
// shard's cursor and the hold table), the partition and offset from the batch log row
// whose seqs list the event's seq.

package plugin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// v2Row is an event of a v2 table as the trace shows it: never the payload, nor the
// error message (the status view has neither).
type v2Row struct {
	EventID, AggregateType, AggregateID string
	AggregateVersion                    int64
	EventType, Destination, MessageKey  string
	CreatedAt                           time.Time
	Shard                               int64
	Seq                                 int64
	Status                              string
	Attempts                            int64
	LastErrorCode                       sql.NullString
	NextAttemptAt                       sql.NullTime
	// The batch log row that published it (Batch invalid: none found).
	Batch             sql.NullInt64
	BatchOwner        sql.NullString
	BatchAt           sql.NullTime
	Partition, Offset sql.NullInt64
	// ArchivedAt is set for a row read from the v2 archive (trace_v2_archive.go);
	// Status is then its state, PASSED or DEAD.
	ArchivedAt sql.NullTime
}

// traceV2SQL reads the event's status view row and, for a SENT event, the first batch
// log row from its created_at on that moved its shard and lists its seq. The batch is
// logged after the event committed, so at >= created_at holds (created_at is the
// producer's transaction start, on the same clock); the walk of <table>_batch_at
// from there visits the batches logged between the event's insert and its publish
// (a few while the relay keeps up; with a backlog, the batches of the backlog ahead
// of it) and reads the seqs only of those that moved its shard (the CASE keeps the
// cheap shard test first: with a plain AND the planner detoasted every batch's seqs,
// 4.7 ms and 1,576 buffers against 0.26 ms and 79 for 500 batches). An event sent from
// the hold table after a failure is in a batch row of no shard (shards '{}', written
// by the settle). A SENT event in no row (published before the batch log had seqs)
// walks to the log's end. $1 the event id.
func traceV2SQL(t pgident.Table) string {
	return v2TraceSelect(t, t.WithSuffix(schema.StatusViewSuffix).Qualified()+` s`, `WHERE s.event_id = $1`)
}

// traceV2AggregateSQL is traceV2SQL for the newest $3 versions of aggregate $1/$2, in
// version order (trace --aggregate): the view's lookup by aggregate uses the table's
// unique (aggregate_type, aggregate_id, aggregate_version) index, and the batch log
// walk runs once per SENT row listed, as for one event.
func traceV2AggregateSQL(t pgident.Table) string {
	return v2TraceSelect(t, `(SELECT * FROM `+t.WithSuffix(schema.StatusViewSuffix).Qualified()+`
      WHERE aggregate_type = $1 AND aggregate_id = $2 ORDER BY aggregate_version DESC LIMIT $3) s`,
		`ORDER BY s.aggregate_version`)
}

// v2TraceSelect reads the status view rows of from (aliased s), each with its batch
// log row once SENT, then applies tail (a WHERE or an ORDER BY).
func v2TraceSelect(t pgident.Table, from, tail string) string {
	return `SELECT ` + v2TraceColumns + `
FROM ` + from + `
` + publishingBatch(t, `s.status = '`+schema.StatusSent+`'`) + `
` + tail
}

// v2TraceColumns are what v2Row.targets scans, of an event s and its batch log row b.
const v2TraceColumns = `s.event_id, s.aggregate_type, s.aggregate_id, s.aggregate_version, s.event_type, s.destination,
       s.message_key, s.created_at, s.shard, s.seq, s.status, s.attempts, s.last_error_code, s.next_attempt_at,
       b.batch, b.owner, b.at, b.kafka_partition, b.kafka_offset`

// publishingBatch joins to event s (created_at, shard, seq) the batch log row b that
// published it, walked only where published (a condition on s) holds: the first row
// from its created_at on that moved its shard, or of no shard (a send from the hold
// table), and lists its seq (see traceV2SQL for why the walk is shaped so).
func publishingBatch(t pgident.Table, published string) string {
	return `LEFT JOIN LATERAL (
    SELECT b.batch, b.owner, b.at, b.partitions[p.i] AS kafka_partition, b.offsets[p.i] AS kafka_offset
    FROM ` + t.WithSuffix(schema.BatchSuffix).Qualified() + ` b
    CROSS JOIN LATERAL (SELECT CASE WHEN s.shard = ANY (b.shards) OR b.shards = '{}' THEN array_position(b.seqs, s.seq) END AS i) p
    WHERE ` + published + ` AND b.at >= s.created_at AND p.i IS NOT NULL
    ORDER BY b.at
    LIMIT 1
) b ON true`
}

// targets are the columns v2TraceSelect reads, in its order.
func (r *v2Row) targets() []any {
	return []any{&r.EventID, &r.AggregateType, &r.AggregateID, &r.AggregateVersion,
		&r.EventType, &r.Destination, &r.MessageKey, &r.CreatedAt, &r.Shard, &r.Seq, &r.Status, &r.Attempts,
		&r.LastErrorCode, &r.NextAttemptAt, &r.Batch, &r.BatchOwner, &r.BatchAt, &r.Partition, &r.Offset}
}

// hasStatusView is nil when t (a v2 table) has its status view, else one line saying
// how to make it (a table made before the view existed).
func hasStatusView(ctx context.Context, tx *sql.Tx, t pgident.Table) error {
	view := t.WithSuffix(schema.StatusViewSuffix)
	ok, err := exists(ctx, tx, view)
	if err == nil && !ok {
		err = fmt.Errorf("outbox table %s follows contract v2 but has no status view %s (run `relayworker migrate`)", t, view)
	}
	return err
}

// findV2 reads the event from a v2 table; nil when it is in neither the table nor its
// hold table. A table made before the status view existed gets one line.
func findV2(ctx context.Context, tx *sql.Tx, t pgident.Table, id string) (*v2Row, error) {
	if err := hasStatusView(ctx, tx, t); err != nil {
		return nil, err
	}
	var r v2Row
	err := tx.QueryRowContext(ctx, traceV2SQL(t), id).Scan(r.targets()...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read event %q from %s: %w", id, t.WithSuffix(schema.StatusViewSuffix), err)
	}
	return &r, nil
}

// renderV2 prints a v2 event as "field: value" lines, then its replay audit.
func renderV2(out io.Writer, loc location) {
	r := loc.v2
	where := loc.table.String() + " (contract v2)"
	if r.ArchivedAt.Valid {
		where = loc.table.WithSuffix(schema.ArchiveSuffix).String() + " (contract v2, archived)"
	}
	fmt.Fprintf(out, "EVENT %s  pipeline %s/%s  table %s\n", r.EventID, loc.p.Namespace, loc.p.Name, where)
	w := tabwriter.NewWriter(out, 0, 8, 1, ' ', 0)
	field := fieldPrinter(w)
	field("status", r.Status)
	if r.ArchivedAt.Valid {
		// Next to the status, which is the archive's state, not the view's.
		field("archived", timestamp(r.ArchivedAt.Time)+" ("+v2ArchivedState(r)+")")
	}
	field("attempts", v2Attempts(r))
	field("last error", r.LastErrorCode.String)
	field("aggregate", fmt.Sprintf("%s/%s version %d", r.AggregateType, r.AggregateID, r.AggregateVersion))
	field("event type", r.EventType)
	field("destination", fmt.Sprintf("topic %s, key %s", r.Destination, r.MessageKey))
	field("shard", fmt.Sprintf("%d, seq %d", r.Shard, r.Seq))
	field("created", timestamp(r.CreatedAt))
	field("batch", v2Batch(r))
	field("broker", v2Broker(r))
	_ = w.Flush()
	renderAudits(out, loc)
	fmt.Fprintln(out)
}

// v2Attempts are the hold row's attempts; a PASSED archive row has none (it was an
// outbox row, which counts no attempts).
func v2Attempts(r *v2Row) string {
	if r.ArchivedAt.Valid && r.Status == schema.ArchivePassed {
		return ""
	}
	attempts := itoa(r.Attempts)
	if r.Status == schema.StatusRetry && r.NextAttemptAt.Valid {
		attempts += " (next retry " + timestamp(r.NextAttemptAt.Time) + ")"
	}
	return attempts
}

func v2Batch(r *v2Row) string {
	if !r.Batch.Valid {
		return ""
	}
	return fmt.Sprintf("%d by worker %s at %s", r.Batch.Int64, r.BatchOwner.String, timestamp(r.BatchAt.Time))
}

func v2Broker(r *v2Row) string {
	switch {
	case r.Partition.Valid:
		return fmt.Sprintf("partition %d, offset %d", r.Partition.Int64, r.Offset.Int64)
	case r.Status == schema.StatusSent:
		return "not in the batch log (published before the batch log recorded seqs)"
	case r.Status == schema.ArchivePassed:
		// Retention trims the batch log by age too, so an archived event's batch
		// row is often gone by the next run.
		return "not in the batch log (trimmed by its own retention, or published before it recorded seqs)"
	}
	return ""
}
