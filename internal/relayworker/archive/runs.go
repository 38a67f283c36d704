// runs.go: the run history in <table>_archive_runs (docs/worker-contract.md,
// "archive flags"), which the RetentionPolicy controller reads for its status.

package archive

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/go-logr/logr"

	"github.com/outbox-operator/outbox-operator/internal/pgerr"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/redact"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// recordTimeout bounds writing the run row. The write runs detached from the run's
// context, so a run stopped by SIGTERM (or any cancel) is still recorded.
const recordTimeout = 10 * time.Second

// maxErrorText bounds the error text stored per run; the status shows less still.
const maxErrorText = 1000

// recordRun writes one row to <table>_archive_runs and trims the policy's history to
// the newest schema.ArchiveRunsKept runs. It never fails the run: the rows were moved
// whether or not the history says so, and the Job's exit code stays about the archive
// work. A missing runs table (created before `relayworker migrate` knew it) is only
// reported.
func recordRun(ctx context.Context, db *sql.DB, o Options, elapsed time.Duration, res Result, runErr error, log logr.Logger) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	runs := o.Table.WithSuffix(schema.ArchiveRunsSuffix)
	err := insertRun(rctx, db, o, elapsed, res, runErr)
	switch {
	case err == nil:
	case pgerr.IsUndefinedTable(err):
		log.Info("run history table missing; run `relayworker migrate` to record runs for the RetentionPolicy status",
			"table", runs.String())
	default:
		log.Error(errors.New(redact.DSN(err.Error(), o.DSN)), "could not record the run", "table", runs.String(), "policy", o.Policy)
	}
}

// insertRun records the run and trims older runs of the same policy in one transaction.
// Times come from the database clock (started_at = now() - elapsed) like every other
// timestamp in the table, so they compare with sent_at and updated_at.
func insertRun(ctx context.Context, db *sql.DB, o Options, elapsed time.Duration, res Result, runErr error) error {
	var errText sql.NullString
	if runErr != nil {
		errText = sql.NullString{String: redact.Truncate(redact.DSN(runErr.Error(), o.DSN), maxErrorText), Valid: true}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if _, err := tx.ExecContext(ctx, insertRunSQL(o.Table),
		o.Policy, o.Mode, elapsed.Seconds(), res.SentMoved, res.DeadMoved, res.ConsumerLogTrims, errText); err != nil {
		return err
	}
	// Everything older than the policy's ArchiveRunsKept-th newest run goes (one index
	// range on (policy, started_at DESC)); fewer runs leave the subquery empty.
	if _, err := tx.ExecContext(ctx, trimRunsSQL(o.Table), o.Policy, schema.ArchiveRunsKept-1); err != nil {
		return err
	}
	return tx.Commit()
}

func insertRunSQL(t pgident.Table) string {
	return `INSERT INTO ` + t.WithSuffix(schema.ArchiveRunsSuffix).Qualified() + `
    (policy, mode, started_at, finished_at, sent_moved, dead_moved, consumer_log_trimmed, error)
VALUES ($1, $2, now() - make_interval(secs => $3), now(), $4, $5, $6, $7)`
}

func trimRunsSQL(t pgident.Table) string {
	runs := t.WithSuffix(schema.ArchiveRunsSuffix).Qualified()
	return `DELETE FROM ` + runs + ` WHERE policy = $1 AND (started_at, run_id) < (
    SELECT started_at, run_id FROM ` + runs + ` WHERE policy = $1
    ORDER BY started_at DESC, run_id DESC OFFSET $2 LIMIT 1)`
}
