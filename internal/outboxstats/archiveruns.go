package outboxstats

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// ArchiveRun is one recorded `relayworker archive` run of a retention policy.
type ArchiveRun struct {
	Mode               string
	StartedAt          time.Time
	FinishedAt         time.Time
	SentMoved          int64
	DeadMoved          int64
	ConsumerLogTrimmed int64
	Error              string // empty when the run succeeded
}

// ReadLastArchiveRun reads the newest run of policy (<namespace>/<name>) from
// <t>_archive_runs. found is false when the policy has no run yet, and also when the
// runs table does not exist (a table migrated before it was added has no history,
// which is not the policy's problem). One index probe on (policy, started_at DESC),
// read-only, bounded by Timeout like Read.
func ReadLastArchiveRun(ctx context.Context, db *sql.DB, t pgident.Table, policy string) (r ArchiveRun, found bool, err error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	runs := t.WithSuffix(schema.ArchiveRunsSuffix)
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return r, false, classify(runs, err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	if _, err := tx.ExecContext(ctx, setStatementTimeout); err != nil {
		return r, false, classify(runs, err)
	}
	var errText sql.NullString
	err = tx.QueryRowContext(ctx, lastArchiveRunSQL(runs), policy).
		Scan(&r.Mode, &r.StartedAt, &r.FinishedAt, &r.SentMoved, &r.DeadMoved, &r.ConsumerLogTrimmed, &errText)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return r, false, nil
	case err != nil:
		if err = classify(runs, err); errors.Is(err, ErrTableMissing) {
			return r, false, nil
		}
		return r, false, err
	}
	r.Error = errText.String
	return r, true, nil
}

// lastArchiveRunSQL reads the newest run of policy $1 from the runs table.
func lastArchiveRunSQL(runs pgident.Table) string {
	return `SELECT mode, started_at, finished_at, sent_moved, dead_moved, consumer_log_trimmed, error
FROM ` + runs.Qualified() + ` WHERE policy = $1 ORDER BY started_at DESC, run_id DESC LIMIT 1`
}
