// handback.go: handing DEAD rows back to the relay, at a rate, and waiting until
// the relay settled them (SENT or DEAD again).

package replay

import (
	"context"
	"fmt"
	"time"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// handBack hands ids[from:to] back to the relay (PENDING on v1, RETRY on v2) and records `to` as the
// replay's progress in the same transaction, so a resumed run knows exactly which rows
// it handed back. Rows no longer DEAD (archived, or replayed by someone else) are left
// alone.
func (r *Replayer) handBack(ctx context.Context, ids []string, from, to int) error {
	tx, err := r.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("hand events back to the relay: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if _, err := tx.ExecContext(ctx, r.sql.handBack, pq.Array(ids[from:to]), r.Opts.ReplayID); err != nil {
		return fmt.Errorf("hand events back to the relay: %w", err)
	}
	if _, err := tx.ExecContext(ctx, progressSQL(r.Opts.Table), r.Opts.ReplayID, to); err != nil {
		return fmt.Errorf("record replay progress: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("hand events back to the relay: %w", err)
	}
	return nil
}

func progressSQL(t pgident.Table) string {
	return `UPDATE ` + auditTable(t) + ` SET replayed = $2 WHERE replay_id = $1`
}

// handBackAtRate hands ids[from:] back in slices of a tenth of a second's worth.
func (r *Replayer) handBackAtRate(ctx context.Context, ids []string, from int) error {
	chunk := max(1, r.Opts.Rate/10)
	tick := time.NewTicker(time.Second * time.Duration(chunk) / time.Duration(r.Opts.Rate))
	defer tick.Stop()
	for start := from; start < len(ids); start += chunk {
		if err := r.handBack(ctx, ids, start, min(start+chunk, len(ids))); err != nil {
			return err
		}
		if start+chunk < len(ids) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
		}
	}
	return nil
}

type counts struct{ sent, dead, inflight int }

// settle waits until every id is SENT or DEAD (or gone: archived after SENT on v1,
// deleted from the hold table once sent on v2).
func (r *Replayer) settle(ctx context.Context, ids []string) (counts, error) {
	deadline := time.Now().Add(r.Opts.SettleTimeout)
	for {
		c, err := r.count(ctx, ids)
		if err != nil {
			return c, err
		}
		if c.inflight == 0 {
			return c, nil
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("%d replayed events are still in flight after %s; is the relay running?", c.inflight, r.Opts.SettleTimeout)
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-time.After(r.Opts.PollEvery):
		}
	}
}

func (r *Replayer) count(ctx context.Context, ids []string) (counts, error) {
	var c counts
	err := r.DB.QueryRowContext(ctx, r.sql.count, pq.Array(ids)).Scan(&c.sent, &c.dead, &c.inflight)
	if err != nil {
		return c, fmt.Errorf("count replayed events: %w", err)
	}
	return c, nil
}
