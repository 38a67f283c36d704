// audit.go: the replay's row in <table>_replay_audit, keyed by replay id: written at
// the start, advanced with every hand-back, finished with the counts. The
// DeadLetterReplay controller reads its status from it.

package replay

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// begin records the replay, or loads it when this replay id ran before. finished is
// true when the recorded replay already ended (its counts are returned as they are).
func (r *Replayer) begin(ctx context.Context) (ids []string, res Result, finished bool, err error) {
	var phase string
	var raw []byte
	err = r.DB.QueryRowContext(ctx, readAuditSQL(r.Opts.Table), r.Opts.ReplayID).
		Scan(&phase, &raw, &res.Matched, &res.Replayed, &res.Succeeded, &res.DeadAgain)
	switch {
	case err == nil:
		res.Phase = phase
		if phase == PhaseFailed {
			return nil, res, true, fmt.Errorf("%w: replay %s already failed; create a new replay after fixing the cause", ErrCanaryFailed, r.Opts.ReplayID)
		}
		if phase == PhaseSucceeded {
			return nil, res, true, nil
		}
		if err := json.Unmarshal(raw, &ids); err != nil {
			return nil, res, false, fmt.Errorf("read audit of replay %s: %w", r.Opts.ReplayID, err)
		}
		r.Log.Info("resuming replay", "replayId", r.Opts.ReplayID, "matched", len(ids))
		return ids, res, false, nil
	case !errors.Is(err, sql.ErrNoRows):
		return nil, res, false, fmt.Errorf("read audit of replay %s: %w", r.Opts.ReplayID, err)
	}

	if ids, err = r.match(ctx); err != nil {
		return nil, res, false, err
	}
	sel, _ := json.Marshal(r.Opts.Selector)
	idsJSON, _ := json.Marshal(ids)
	_, err = r.DB.ExecContext(ctx, insertAuditSQL(r.Opts.Table),
		r.Opts.ReplayID, r.Opts.RequestedBy, r.Opts.Reason, sel, r.Opts.DryRun, PhaseRunning, len(ids), idsJSON)
	if err != nil {
		return nil, res, false, fmt.Errorf("write audit of replay %s: %w", r.Opts.ReplayID, err)
	}
	return ids, Result{Phase: PhaseRunning, Matched: len(ids)}, false, nil
}

// finish writes the final counts and phase; only the handed-back ids[:handed] count.
func (r *Replayer) finish(ctx context.Context, ids []string, handed int, phase string) (Result, error) {
	res := Result{Phase: phase, Matched: len(ids), Replayed: handed}
	if handed > 0 {
		c, err := r.count(ctx, ids[:handed])
		if err != nil {
			return res, err
		}
		res.Succeeded, res.DeadAgain = c.sent, c.dead
	}
	_, err := r.DB.ExecContext(ctx, finishAuditSQL(r.Opts.Table),
		r.Opts.ReplayID, phase, res.Replayed, res.Succeeded, res.DeadAgain)
	if err != nil {
		return res, fmt.Errorf("finish audit of replay %s: %w", r.Opts.ReplayID, err)
	}
	return res, nil
}

func auditTable(t pgident.Table) string { return t.WithSuffix(schema.ReplayAuditSuffix).Qualified() }

func readAuditSQL(t pgident.Table) string {
	return `SELECT phase, event_ids, matched, replayed, succeeded, dead_again FROM ` + auditTable(t) + ` WHERE replay_id = $1`
}

func insertAuditSQL(t pgident.Table) string {
	return `INSERT INTO ` + auditTable(t) + ` (replay_id, requested_by, reason, selector, dry_run, phase, matched, event_ids)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (replay_id) DO NOTHING`
}

func finishAuditSQL(t pgident.Table) string {
	return `UPDATE ` + auditTable(t) + `
		SET phase = $2, replayed = $3, succeeded = $4, dead_again = $5, finished_at = now() WHERE replay_id = $1`
}
