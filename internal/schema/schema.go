// Package schema owns the outbox table contracts (docs/architecture.md, "Table contract";
// v1: docs/operations.md, "What a v1 table is"): the idempotent
// DDL behind `relayworker migrate`, the side tables, and a start-up check that tells a
// user in one line what is missing. Both the relay worker and the operator's status
// reader use it, so the column names live in one place.
package schema

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// Statuses of the relay state machine.
const (
	StatusPending = "PENDING"
	StatusSending = "SENDING"
	StatusSent    = "SENT"
	StatusRetry   = "RETRY"
	StatusDead    = "DEAD"
)

// NonTerminalIn is the SQL list of the statuses a row can still leave: the rows the
// relay has work for. The partial indexes are built WHERE status IN NonTerminalIn,
// and the planner uses them only for queries that spell the same list, so every
// statement that wants the hot set writes `status IN ` + NonTerminalIn.
const NonTerminalIn = `('PENDING', 'SENDING', 'RETRY')`

// Side-table suffixes and the consumer log table name.
const (
	ArchiveSuffix     = "_archive"
	ArchiveRunsSuffix = "_archive_runs"
	ReplayAuditSuffix = "_replay_audit"
	// WorkersSuffix names the table where each relay worker reports its broker state
	// (WorkersDDL); the operator reads it for the pipeline's status.
	WorkersSuffix = "_workers"
	ConsumeTable  = "message_consume"
	// ParkedTable holds the messages an inbox consumer group could not handle
	// (inbox/parked.go); kubectl outbox trace reads it too.
	ParkedTable = "message_consume_parked"
)

// ArchiveRunsKept is how many runs per retention policy the run history keeps; each
// `relayworker archive` run trims older ones in the transaction that records it.
const ArchiveRunsKept = 100

// Options for Migrate.
type Options struct {
	// NotifyTrigger installs a statement-level trigger that NOTIFYs the relay after
	// plain-SQL inserts. Identical notifications in one transaction are folded by
	// PostgreSQL, so it costs at most one NOTIFY per transaction.
	NotifyTrigger bool
}

// Channel is the LISTEN/NOTIFY channel for table t.
func Channel(t pgident.Table) string { return t.Name }

// LeasesReleased is the payload of the NOTIFY a v2 worker sends on Channel after it
// released shards: the others run a lease round at once and take them, instead of
// at their next round (producers' notifications carry an empty payload).
const LeasesReleased = "leases-released"

// LeasesWanted is the payload of the NOTIFY a v2 worker sends on Channel when a lease
// round left it under its fair share while others hold more (a worker joined): they
// run a lease round at once and release their excess, instead of at their next round
// (lease/3 later: the joiner stood idle that long and the others carried its share).
const LeasesWanted = "leases-wanted"

// Migrate creates (or completes) the outbox table, its indexes and side tables. It is
// idempotent and safe to run from several pods at once, for one table or for many
// tables of one schema: the objects a whole schema shares (the schema itself and
// message_consume) are created first under the schema's lock (MigrateShared), then the
// table's own objects under a transaction-scoped advisory lock keyed on the table. No
// transaction holds both locks, so two migrates cannot deadlock.
func Migrate(ctx context.Context, db *sql.DB, t pgident.Table, opts Options) error {
	if err := MigrateShared(ctx, db, t.Schema, SharedStatements(t.Schema)); err != nil {
		return fmt.Errorf("migrate %s: %w", t, err)
	}
	return inTx(ctx, db, "outbox-migrate:"+t.String(), Statements(t, opts), func(err error) error {
		return fmt.Errorf("migrate %s: %w", t, err)
	})
}

// SharedStatements is the DDL of the objects every outbox table of a schema shares.
func SharedStatements(schemaName string) []string {
	return []string{`CREATE SCHEMA IF NOT EXISTS ` + pgident.Quote(schemaName), ConsumeTableDDL(schemaName)}
}

// MigrateShared runs stmts in one transaction holding the schema's DDL lock. Every
// migrate that creates an object more than one caller may create in schemaName (the
// schema, message_consume, the inbox tables) runs it through here: "IF NOT EXISTS" is
// not safe against a concurrent creator, the loser fails on a catalog unique index
// (pg_namespace_nspname_index, pg_type_typname_nsp_index).
func MigrateShared(ctx context.Context, db *sql.DB, schemaName string, stmts []string) error {
	return inTx(ctx, db, "outbox-migrate-schema:"+schemaName, stmts, func(err error) error { return err })
}

// inTx runs stmts in one transaction after taking the advisory lock lockKey; wrap
// adds the caller's context to an error.
func inTx(ctx context.Context, db *sql.DB, lockKey string, stmts []string, wrap func(error) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return wrap(fmt.Errorf("begin: %w", err))
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, lockKey); err != nil {
		return wrap(fmt.Errorf("lock: %w", err))
	}
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return wrap(fmt.Errorf("%w (statement: %s)", err, firstLine(stmt)))
		}
	}
	if err := tx.Commit(); err != nil {
		return wrap(fmt.Errorf("commit: %w", err))
	}
	return nil
}

// Statements returns the DDL of the table's own objects that Migrate runs, in order,
// after SharedStatements.
func Statements(t pgident.Table, opts Options) []string {
	q := t.Qualified()
	nonTerminal := `status IN ` + NonTerminalIn
	stmts := []string{
		`CREATE TABLE IF NOT EXISTS ` + q + ` (
    event_id           text        PRIMARY KEY,
    aggregate_type     text        NOT NULL,
    aggregate_id       text        NOT NULL,
    aggregate_version  bigint      NOT NULL,
    event_type         text        NOT NULL,
    event_version      int         NOT NULL DEFAULT 1,
    destination        text        NOT NULL,
    message_key        text        NOT NULL,
    payload            jsonb       NOT NULL,
    headers            jsonb       NULL,
    status             text        NOT NULL DEFAULT 'PENDING'
                       CHECK (status IN ('PENDING', 'SENDING', 'SENT', 'RETRY', 'DEAD')),
    owner_token        text        NULL,
    lease_until        timestamptz NULL,
    retry_count        int         NOT NULL DEFAULT 0,
    next_retry_at      timestamptz NOT NULL DEFAULT now(),
    last_error_code    text        NULL,
    last_error_message text        NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    sent_at            timestamptz NULL,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    broker_partition   int         NULL,
    broker_offset      bigint      NULL
)`,
		// Older tables created before a column existed get it added.
		`ALTER TABLE ` + q + ` ADD COLUMN IF NOT EXISTS broker_partition int NULL`,
		`ALTER TABLE ` + q + ` ADD COLUMN IF NOT EXISTS broker_offset bigint NULL`,
		// Dispatch: only the hot, non-terminal rows are indexed, so SENT/DEAD history
		// does not slow claims down.
		`CREATE INDEX IF NOT EXISTS ` + t.Ident("_dispatch_idx") + ` ON ` + q +
			` (status, next_retry_at, created_at) WHERE ` + nonTerminal,
		// Per-aggregate order check ("is an older version still in flight?").
		`CREATE INDEX IF NOT EXISTS ` + t.Ident("_aggregate_inflight_idx") + ` ON ` + q +
			` (aggregate_type, aggregate_id, aggregate_version) WHERE ` + nonTerminal,
		// One event per aggregate version; also serves as the aggregate index.
		`CREATE UNIQUE INDEX IF NOT EXISTS ` + t.Ident("_aggregate_version_key") + ` ON ` + q +
			` (aggregate_type, aggregate_id, aggregate_version)`,
		// Cheap dead counts for status, and retention scans of terminal rows.
		`CREATE INDEX IF NOT EXISTS ` + t.Ident("_dead_idx") + ` ON ` + q + ` (created_at) WHERE status = 'DEAD'`,
		`CREATE INDEX IF NOT EXISTS ` + t.Ident("_sent_idx") + ` ON ` + q + ` (sent_at) WHERE status = 'SENT'`,

		`CREATE TABLE IF NOT EXISTS ` + t.WithSuffix(ArchiveSuffix).Qualified() + ` (
    LIKE ` + q + ` INCLUDING DEFAULTS,
    archived_at timestamptz NOT NULL DEFAULT now()
)`,
		`CREATE INDEX IF NOT EXISTS ` + t.Ident(ArchiveSuffix+"_event_idx") + ` ON ` +
			t.WithSuffix(ArchiveSuffix).Qualified() + ` (event_id)`,

		archiveRunsDDL(t),
		archiveRunsIndexDDL(t),

		ReplayAuditDDL(t),

		WorkersDDL(t),
	}
	if opts.NotifyTrigger {
		stmts = append(stmts, NotifyTriggerStatements(t)...)
	}
	return stmts
}

// NotifyTriggerStatements install a statement-level trigger on t that NOTIFYs the
// relay after inserts (migrate --notify-trigger, either contract).
func NotifyTriggerStatements(t pgident.Table) []string {
	fn := pgident.Quote(t.Schema) + "." + t.Ident("_notify")
	q := t.Qualified()
	return []string{
		`CREATE OR REPLACE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify(` + pgident.QuoteLiteral(Channel(t)) + `, '');
    RETURN NULL;
END
$fn$`,
		`DROP TRIGGER IF EXISTS ` + t.Ident("_notify_trg") + ` ON ` + q,
		`CREATE TRIGGER ` + t.Ident("_notify_trg") + ` AFTER INSERT ON ` + q +
			` FOR EACH STATEMENT EXECUTE FUNCTION ` + fn + `()`,
	}
}

// ConsumeTableDDL creates the consumers' dedup table (docs/architecture.md, "Consumers") in schemaName.
// The primary key includes consumer_group: each consumer handles an event once, and
// one group's record must not make another group skip it.
func ConsumeTableDDL(schemaName string) string {
	return `CREATE TABLE IF NOT EXISTS ` + pgident.Quote(schemaName) + `.` + pgident.Quote(ConsumeTable) + ` (
    consumer_group    text        NOT NULL,
    event_id          text        NOT NULL,
    event_type        text        NOT NULL,
    request_hash      text        NOT NULL,
    status            text        NOT NULL,
    result_ref        text        NULL,
    retry_count       int         NOT NULL DEFAULT 0,
    first_received_at timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, event_id)
)`
}

// ReplayAuditDDL creates the audit table of `relayworker replay` (one row per replay
// id: who, why, the selector, the ids chosen and the counts); both contracts have it.
func ReplayAuditDDL(t pgident.Table) string {
	return `CREATE TABLE IF NOT EXISTS ` + t.WithSuffix(ReplayAuditSuffix).Qualified() + ` (
    replay_id    text        PRIMARY KEY,
    requested_by text        NOT NULL,
    reason       text        NOT NULL,
    selector     jsonb       NOT NULL,
    dry_run      boolean     NOT NULL DEFAULT false,
    phase        text        NOT NULL,
    matched      int         NOT NULL DEFAULT 0,
    replayed     int         NOT NULL DEFAULT 0,
    succeeded    int         NOT NULL DEFAULT 0,
    dead_again   int         NOT NULL DEFAULT 0,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz NULL,
    event_ids    jsonb       NULL
)`
}

// WorkersDDL creates the worker-status table: one row per running `relayworker relay`
// (worker_id = --worker-id, the pod name), upserted when the worker starts, on every
// broker pause and resume, and as a heartbeat every few seconds; deleted when the
// worker stops cleanly. broker_up = false means the worker has paused claiming because
// no broker answers (broker_down_since, broker_error_code say since when and why). Rows
// whose heartbeat_at is older than a minute belong to workers that died and are ignored.
func WorkersDDL(t pgident.Table) string {
	return `CREATE TABLE IF NOT EXISTS ` + t.WithSuffix(WorkersSuffix).Qualified() + ` (
    worker_id         text        PRIMARY KEY,
    broker_up         boolean     NOT NULL DEFAULT true,
    broker_down_since timestamptz NULL,
    broker_error_code text        NULL,
    started_at        timestamptz NOT NULL DEFAULT now(),
    heartbeat_at      timestamptz NOT NULL DEFAULT now()
)`
}

// Columns are the outbox table's columns in table order; the archive table has the same
// columns plus archived_at.
var Columns = []string{
	"event_id", "aggregate_type", "aggregate_id", "aggregate_version", "event_type",
	"event_version", "destination", "message_key", "payload", "headers", "status",
	"owner_token", "lease_until", "retry_count", "next_retry_at", "last_error_code",
	"last_error_message", "created_at", "sent_at", "updated_at", "broker_partition", "broker_offset",
}

// Verify checks that the outbox table exists with every column the relay needs and
// returns one actionable error otherwise.
func Verify(ctx context.Context, db *sql.DB, t pgident.Table) error {
	rows, err := db.QueryContext(ctx,
		`SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2`,
		t.Schema, t.Name)
	if err != nil {
		return fmt.Errorf("check table %s: %w", t, err)
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return fmt.Errorf("check table %s: %w", t, err)
		}
		have[c] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("check table %s: %w", t, err)
	}
	if len(have) == 0 {
		return fmt.Errorf("outbox table %s does not exist (run `relayworker migrate`)", t)
	}
	var missing []string
	for _, c := range Columns {
		if !have[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("outbox table %s lacks columns %s (run `relayworker migrate`)", t, strings.Join(missing, ", "))
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// archiveRunsDDL is the run history of `relayworker archive` (both contracts): one row
// per run, so the RetentionPolicy status can show what the last run did (and why it
// failed) without parsing Job logs.
func archiveRunsDDL(t pgident.Table) string {
	return `CREATE TABLE IF NOT EXISTS ` + t.WithSuffix(ArchiveRunsSuffix).Qualified() + ` (
    run_id               bigserial   PRIMARY KEY,
    policy               text        NOT NULL,
    mode                 text        NOT NULL,
    started_at           timestamptz NOT NULL,
    finished_at          timestamptz NOT NULL DEFAULT now(),
    sent_moved           bigint      NOT NULL DEFAULT 0,
    dead_moved           bigint      NOT NULL DEFAULT 0,
    consumer_log_trimmed bigint      NOT NULL DEFAULT 0,
    error                text        NULL
)`
}

// archiveRunsIndexDDL: "newest run of a policy" and the per-policy trim. Not
// "_archive_runs_..." on purpose: PostgreSQL truncates names to 63 bytes, and for a
// maximal table name that prefix would truncate to the runs table's own name.
func archiveRunsIndexDDL(t pgident.Table) string {
	return `CREATE INDEX IF NOT EXISTS ` + t.Ident("_archive_run_policy_idx") + ` ON ` +
		t.WithSuffix(ArchiveRunsSuffix).Qualified() + ` (policy, started_at DESC)`
}
