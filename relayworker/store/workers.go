// workers.go: the worker-status table (schema.WorkersDDL) where each relay reports
// whether it can reach the brokers, and the reset of broker-caused backoffs.

package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/pgerr"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// ErrNoWorkersTable means the table was migrated by a version without the
// worker-status table; the relay runs on without reporting (the next migrate adds it).
var ErrNoWorkersTable = errors.New("worker-status table missing (run `relayworker migrate`)")

// ReportWorker upserts the worker's row: broker state and heartbeat (database clock).
// broker_down_since keeps the start of an ongoing outage.
func (s *Store) ReportWorker(ctx context.Context, workerID string, brokerUp bool, code string) error {
	q := `INSERT INTO ` + s.t.WithSuffix(schema.WorkersSuffix).Qualified() + ` AS w
    (worker_id, broker_up, broker_down_since, broker_error_code)
VALUES ($1, $2, CASE WHEN $2 THEN NULL ELSE now() END, NULLIF($3, ''))
ON CONFLICT (worker_id) DO UPDATE SET
    broker_up = EXCLUDED.broker_up,
    broker_down_since = CASE WHEN EXCLUDED.broker_up THEN NULL ELSE COALESCE(w.broker_down_since, now()) END,
    broker_error_code = EXCLUDED.broker_error_code,
    heartbeat_at = now()`
	s.Statements.Add(1)
	_, err := s.db.ExecContext(ctx, q, workerID, brokerUp, code)
	return workersErr("report worker state", err)
}

// RemoveWorker deletes the worker's row (clean shutdown).
func (s *Store) RemoveWorker(ctx context.Context, workerID string) error {
	s.Statements.Add(1)
	_, err := s.db.ExecContext(ctx, `DELETE FROM `+s.t.WithSuffix(schema.WorkersSuffix).Qualified()+
		` WHERE worker_id = $1`, workerID)
	return workersErr("remove worker state", err)
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

// ReleaseBrokerRetries makes RETRY rows whose last failure was one of codes claimable
// now: a backoff a broker outage caused (a batch that partly failed as the brokers went
// away) must not outlive the outage, nor hold back the newer versions of its aggregate.
// Attempts already counted stay counted. It returns the number of rows released.
func (s *Store) ReleaseBrokerRetries(ctx context.Context, codes []string) (int64, error) {
	s.Statements.Add(1)
	res, err := s.db.ExecContext(ctx, `UPDATE `+s.t.Qualified()+` SET next_retry_at = now(), updated_at = now()
WHERE status = 'RETRY' AND next_retry_at > now() AND last_error_code = ANY ($1::text[])`, pq.Array(codes))
	if err != nil {
		return 0, fmt.Errorf("release broker retries: %w", err)
	}
	return res.RowsAffected()
}
