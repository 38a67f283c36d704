package outboxstats

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgerr"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// WorkerStaleAfter is how old (database clock) a worker's heartbeat_at may be before
// its row is ignored: workers heartbeat every ~10 s, so a silent row belongs to a
// worker that died without deleting it.
const WorkerStaleAfter = time.Minute

// Workers summarises the fresh rows of <table>_workers (schema.WorkersDDL): what the
// running relay workers report about their Kafka brokers. The zero value means "no
// reports", which is also what a table without a workers table yet yields.
type Workers struct {
	// Reporting is the number of workers with a fresh heartbeat.
	Reporting int32
	// BrokerDown is how many of them cannot reach any broker and paused claiming.
	BrokerDown int32
	// BrokerDownSince is the earliest broker_down_since among those (zero when none,
	// or when none of them said since when).
	BrokerDownSince time.Time
	// BrokerErrorCode is the most common broker_error_code among those (ties: the
	// alphabetically first); empty when none was reported.
	BrokerErrorCode string
}

// readWorkers reads the worker reports of t in one statement on the database clock.
// It runs inside Read's read-only transaction (same statement timeout), as its last
// statement: a missing workers table (SQLSTATE 42P01, a table migrated by an older
// version before the init container re-ran) aborts that transaction, which then has
// nothing left to do, and means "no reports" rather than an error.
func readWorkers(ctx context.Context, tx *sql.Tx, t pgident.Table) (Workers, error) {
	wt := t.WithSuffix(schema.WorkersSuffix)
	var w Workers
	var since sql.NullTime
	var code sql.NullString
	err := tx.QueryRowContext(ctx, workersSQL(wt), WorkerStaleAfter.Seconds()).Scan(&w.Reporting, &w.BrokerDown, &since, &code)
	if pgerr.IsUndefinedTable(err) {
		return Workers{}, nil
	}
	if err != nil {
		return Workers{}, fmt.Errorf("read worker reports from %s: %w", wt, classify(wt, err))
	}
	if since.Valid {
		w.BrokerDownSince = since.Time
	}
	w.BrokerErrorCode = code.String
	return w, nil
}

// workersSQL summarises the fresh rows of the workers table wt: $1 WorkerStaleAfter in
// seconds.
func workersSQL(wt pgident.Table) string {
	return `SELECT
    count(*),
    count(*) FILTER (WHERE NOT broker_up),
    min(broker_down_since) FILTER (WHERE NOT broker_up),
    mode() WITHIN GROUP (ORDER BY broker_error_code) FILTER (WHERE NOT broker_up)
FROM ` + wt.Qualified() + ` WHERE heartbeat_at > now() - make_interval(secs => $1)`
}
