// planner.go: the statements that probe every held shard's newest cursor row outside
// the read (the idle close, the trims, the lease state) run with the read's planner
// settings, in a transaction of their own.

package shardstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// localReadSettings are ReadSettings for one transaction.
var localReadSettings = schema.SetLocal(readPlanner)

// inReadPlannerTx runs fn in a transaction whose planner settings are the read's
// (localReadSettings), and commits it. Why: while a transaction elsewhere in the
// cluster stays open, no cursor log row the trims delete can be pruned, and the
// statistics still say one row per shard. The planner then finds a shard's newest
// row with a bitmap scan of all the shard's entries and a sort, instead of one
// backward probe of the primary key. With 2,700 deleted rows per shard kept by an
// open snapshot, such a statement over 256 shards took 320-360 ms instead of 1.2 ms;
// in two of three ten-minute bench runs the idle close, the cursor trim and the least
// lo_tick took 19-55 ms each (2-9 ms in the third), once a second per worker, while
// the read, planned with these settings, did not slow down.
// TestHousekeepingProbesTheNewestCursorByItsKey checks the plans.
func (s *Store) inReadPlannerTx(ctx context.Context, what string, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", what, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if _, err := tx.ExecContext(ctx, localReadSettings); err != nil {
		return fmt.Errorf("%s: planner settings: %w", what, err)
	}
	if err := fn(tx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", what, err)
	}
	return nil
}
