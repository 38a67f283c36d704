// workers.go: the worker-status table (schema.WorkersDDL) where each relay reports
// whether it can reach the brokers, and the release of the rows a paused worker parked.

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/pgerr"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// ErrNoWorkersTable means the table was migrated by a version without the
// worker-status table; the relay runs on without reporting (the next migrate adds it).
var ErrNoWorkersTable = errors.New("worker-status table missing (run `relayworker migrate`)")

// ReportWorker upserts the worker's row: broker state and heartbeat (database clock).
// broker_down_since keeps the start of an ongoing outage.
func (s *Store) ReportWorker(ctx context.Context, workerID string, brokerUp bool, code string) error {
	s.Statements.Add(1)
	return Workers{DB: s.db, Table: s.t}.Report(ctx, workerID, brokerUp, code)
}

func reportWorkerSQL(t pgident.Table) string {
	return `INSERT INTO ` + t.WithSuffix(schema.WorkersSuffix).Qualified() + ` AS w
    (worker_id, broker_up, broker_down_since, broker_error_code)
VALUES ($1, $2, CASE WHEN $2 THEN NULL ELSE now() END, NULLIF($3, ''))
ON CONFLICT (worker_id) DO UPDATE SET
    broker_up = EXCLUDED.broker_up,
    broker_down_since = CASE WHEN EXCLUDED.broker_up THEN NULL ELSE COALESCE(w.broker_down_since, now()) END,
    broker_error_code = EXCLUDED.broker_error_code,
    heartbeat_at = now()`
}

// RemoveWorker deletes the worker's row (clean shutdown).
func (s *Store) RemoveWorker(ctx context.Context, workerID string) error {
	s.Statements.Add(1)
	return Workers{DB: s.db, Table: s.t}.Remove(ctx, workerID)
}

// Workers is the worker-status table of an outbox table of either contract (both
// share schema.WorkersDDL): the v2 relay reports through it as v1's store does.
type Workers struct {
	DB    *sql.DB
	Table pgident.Table
}

// Report upserts a worker's row (Store.ReportWorker).
func (w Workers) Report(ctx context.Context, workerID string, brokerUp bool, code string) error {
	_, err := w.DB.ExecContext(ctx, reportWorkerSQL(w.Table), workerID, brokerUp, code)
	return workersErr("report worker state", err)
}

// Remove deletes a worker's row (Store.RemoveWorker).
func (w Workers) Remove(ctx context.Context, workerID string) error {
	_, err := w.DB.ExecContext(ctx, removeWorkerSQL(w.Table), workerID)
	return workersErr("remove worker state", err)
}

func removeWorkerSQL(t pgident.Table) string {
	return `DELETE FROM ` + t.WithSuffix(schema.WorkersSuffix).Qualified() + ` WHERE worker_id = $1`
}

func workersErr(what string, err error) error {
	if err == nil {
		return nil
	}
	if pgerr.IsUndefinedTable(err) {
		return ErrNoWorkersTable
	}
	return fmt.Errorf("%s: %w", what, err)
}

// ReleaseParked makes claimable now the RETRY rows a paused worker parked: the rows
// it marked RETRY with a broker error code while the outage began (a batch that partly
// failed as the brokers went away). ids[i] was marked under tokens[i]; a RETRY row
// keeps the owner token of the batch that marked it until it is claimed again, so the
// pair matches only that very mark: rows of other workers, rows claimed again since,
// SENT or DEAD rows are left alone. Attempts already counted stay counted. It returns
// the number of rows released.
func (s *Store) ReleaseParked(ctx context.Context, ids, tokens []string) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	if len(ids) != len(tokens) {
		return 0, fmt.Errorf("release parked rows: %d ids but %d tokens", len(ids), len(tokens))
	}
	s.Statements.Add(1)
	res, err := s.db.ExecContext(ctx, releaseParkedSQL(s.t), pq.Array(ids), pq.Array(tokens))
	if err != nil {
		return 0, fmt.Errorf("release parked rows: %w", err)
	}
	return res.RowsAffected()
}

func releaseParkedSQL(t pgident.Table) string {
	return `UPDATE ` + t.Qualified() + ` t SET next_retry_at = now(), updated_at = now()
FROM unnest($1::text[], $2::text[]) AS u(id, tok)
WHERE t.event_id = u.id AND t.owner_token = u.tok AND t.status = 'RETRY' AND t.next_retry_at > now()`
}

// StatusReporter writes one worker's row of the worker-status table for either relay
// loop, best effort: a failure costs only the operator's view, never the relay. A
// missing table (a table migrated before it existed) is said once and not asked again.
type StatusReporter struct {
	WorkerID string
	// Report writes the row (Store.ReportWorker, or Workers.Report).
	Report func(ctx context.Context, workerID string, brokerUp bool, code string) error
	Log    logr.Logger
	// Failed counts a failed write (the relay's errors_total{stage="stats"}).
	Failed  func()
	missing atomic.Bool
}

// Beat writes the worker's broker state and heartbeat, within 3 s.
func (s *StatusReporter) Beat(ctx context.Context, brokerUp bool, code string) {
	if s.WorkerID == "" || s.missing.Load() {
		return
	}
	c, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	err := s.Report(c, s.WorkerID, brokerUp, code)
	switch {
	case errors.Is(err, ErrNoWorkersTable):
		s.missing.Store(true)
		s.Log.Info("worker-status table missing; broker state is not reported to the operator until `relayworker migrate` runs")
	case err != nil && ctx.Err() == nil:
		s.Failed()
	}
}

// Missing reports whether the worker-status table was found missing.
func (s *StatusReporter) Missing() bool { return s.missing.Load() }
