// Package archive implements `relayworker archive`: it moves (or deletes) terminal
// outbox rows older than their retention, and trims the consumers' dedup log, in
// small batches so it never holds long locks on the hot table. In-flight rows
// (PENDING, SENDING, RETRY; PROCESSING in the consumer log) are never touched: the
// status condition is re-checked under the row lock in the same statement.
package archive

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// Options configure one run (internal/relayworker/cli maps the archive flags to them).
type Options struct {
	Table                pgident.Table
	SentRetention        time.Duration
	DeadRetention        time.Duration
	ConsumerLogRetention time.Duration // 0: leave the consumer log alone
	Mode                 string        // "archive" or "delete"
	BatchSize            int
	// Policy names the RetentionPolicy (<namespace>/<name>) in the run history, so the
	// operator can find this policy's newest run; empty for manual runs.
	Policy string
	// DSN is only used to keep it (and its password) out of the recorded error text.
	DSN string
}

// Result counts what a run did.
type Result struct {
	// SentMoved: v1 SENT rows; v2 outbox rows every cursor had passed.
	SentMoved int64
	// DeadMoved: v1 DEAD rows; v2 DEAD hold rows.
	DeadMoved        int64
	ConsumerLogTrims int64
	// BatchLogTrims: v2 batch log rows (logged; the run history has no column).
	BatchLogTrims int64
}

// Run archives until nothing old enough is left or ctx ends, then records the run
// (counts so far and the error, if any) in <table>_archive_runs for the operator.
func Run(ctx context.Context, db *sql.DB, o Options, log logr.Logger) (Result, error) {
	start := time.Now()
	res, err := run(ctx, db, o)
	recordRun(ctx, db, o, time.Since(start), res, err, log)
	if err != nil {
		return res, err
	}
	log.Info("archive finished", "table", o.Table.String(), "mode", o.Mode,
		"sent", res.SentMoved, "dead", res.DeadMoved, "consumerLog", res.ConsumerLogTrims, "batchLog", res.BatchLogTrims)
	return res, nil
}

// run does the work; on an error res holds what was already moved (and committed).
func run(ctx context.Context, db *sql.DB, o Options) (Result, error) {
	var res Result
	c, err := schema.DetectContract(ctx, db, o.Table)
	if err != nil {
		return res, err
	}
	if c.Version == schema.ContractV2 {
		return runV2(ctx, db, o)
	}
	if err := schema.Verify(ctx, db, o.Table); err != nil {
		return res, err
	}
	// SENT rows age from sent_at; DEAD rows from their last change (updated_at is
	// never before created_at, so "at least this long after created_at" holds too).
	if res.SentMoved, err = drain(ctx, func() (int64, error) {
		return moveBatch(ctx, db, o, schema.StatusSent, "sent_at", o.SentRetention)
	}); err != nil {
		return res, fmt.Errorf("archive SENT rows: %w", err)
	}
	if res.DeadMoved, err = drain(ctx, func() (int64, error) {
		return moveBatch(ctx, db, o, schema.StatusDead, "updated_at", o.DeadRetention)
	}); err != nil {
		return res, fmt.Errorf("archive DEAD rows: %w", err)
	}
	res.ConsumerLogTrims, err = trimConsumerLogs(ctx, db, o)
	return res, err
}

// drain repeats batch until it moves nothing.
func drain(ctx context.Context, batch func() (int64, error)) (int64, error) {
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := batch()
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

// moveBatch removes up to BatchSize rows of one terminal status older than the
// retention, copying them into <table>_archive first in archive mode. One statement,
// one short transaction; SKIP LOCKED keeps it out of the relay's and a replay's way.
func moveBatch(ctx context.Context, db *sql.DB, o Options, status, ageColumn string, retention time.Duration) (int64, error) {
	r, err := db.ExecContext(ctx, moveSQL(o.Table, o.Mode, ageColumn), status, retention.Seconds(), o.BatchSize)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

// moveSQL is moveBatch's statement for mode ("archive" or "delete") and the column a
// row's age is taken from (sent_at or updated_at, run's constants, never user
// input): $1 status, $2 retention in seconds, $3 batch size.
func moveSQL(tbl pgident.Table, mode, ageColumn string) string {
	t := tbl.Qualified()
	victims := `SELECT event_id FROM ` + t + ` WHERE status = $1 AND ` + ageColumn +
		` < now() - make_interval(secs => $2) ORDER BY ` + ageColumn + ` LIMIT $3 FOR UPDATE SKIP LOCKED`
	if mode == "delete" {
		return `WITH v AS (` + victims + `)
DELETE FROM ` + t + ` o USING v WHERE o.event_id = v.event_id AND o.status = $1`
	}
	cols := strings.Join(schema.Columns, ", ")
	return `WITH v AS (` + victims + `),
moved AS (DELETE FROM ` + t + ` o USING v WHERE o.event_id = v.event_id AND o.status = $1 RETURNING o.*)
INSERT INTO ` + tbl.WithSuffix(schema.ArchiveSuffix).Qualified() + ` (` + cols + `, archived_at)
SELECT ` + cols + `, now() FROM moved`
}

// trimConsumerLogs trims the consumers' dedup log in batches when the policy bounds
// it (both contracts: the log is the consumers', not the outbox table's).
func trimConsumerLogs(ctx context.Context, db *sql.DB, o Options) (int64, error) {
	if o.ConsumerLogRetention <= 0 {
		return 0, nil
	}
	n, err := drain(ctx, func() (int64, error) { return trimConsumerLog(ctx, db, o) })
	if err != nil {
		return n, fmt.Errorf("trim consumer log: %w", err)
	}
	return n, nil
}

// trimConsumerLog deletes finished dedup rows past the consumers' dedup window.
// PROCESSING rows belong to a consumer transaction in flight and stay.
func trimConsumerLog(ctx context.Context, db *sql.DB, o Options) (int64, error) {
	tbl := consumeTable(o.Table)
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, tbl).Scan(&exists); err != nil {
		return 0, err
	}
	if !exists {
		return 0, nil
	}
	r, err := db.ExecContext(ctx, trimConsumerLogSQL(tbl), o.ConsumerLogRetention.Seconds(), o.BatchSize)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

// consumeTable is the consumers' dedup log in the outbox table's schema.
func consumeTable(t pgident.Table) string {
	return pgident.Quote(t.Schema) + "." + pgident.Quote(schema.ConsumeTable)
}

// trimConsumerLogSQL: $1 retention in seconds, $2 batch size.
func trimConsumerLogSQL(consume string) string {
	return `WITH v AS (
    SELECT consumer_group, event_id FROM ` + consume + `
    WHERE status <> 'PROCESSING' AND updated_at < now() - make_interval(secs => $1)
    LIMIT $2 FOR UPDATE SKIP LOCKED)
DELETE FROM ` + consume + ` c USING v WHERE c.consumer_group = v.consumer_group AND c.event_id = v.event_id`
}
