// Package replay implements `relayworker replay`: a controlled, audited replay of DEAD
// events (seed section 二十). It does not publish by itself. It hands the selected rows
// back to the relay (DEAD -> PENDING, retry_count 0) so they go out with their ORIGINAL
// event ids, through the same per-aggregate ordering, fencing and retry rules as any
// event, and consumers' dedup and version guards absorb them:
//
//  1. select the matching DEAD rows once and record the set, the selector, who and why
//     in <table>_replay_audit (keyed by replay id: a re-run of the Job resumes);
//  2. hand back a canary first and wait until it settled (SENT or DEAD again); stop
//     with phase Failed when too many went DEAD again;
//  3. hand back the rest at --rate events per second, wait until they settled, and
//     record the counts and the finish time.
package replay

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/relayworker/config"
)

// Phases recorded in the audit table (the DeadLetterReplay status mirrors them).
const (
	PhaseRunning   = "Running"
	PhaseSucceeded = "Succeeded"
	PhaseFailed    = "Failed"
)

// ErrCanaryFailed: too many canary events went DEAD again; the rest was not replayed.
var ErrCanaryFailed = errors.New("canary failed")

// Result is the audit record's counts.
type Result struct {
	Phase     string
	Matched   int
	Replayed  int
	Succeeded int
	DeadAgain int
}

// Replayer runs one replay.
type Replayer struct {
	DB  *sql.DB
	Cfg *config.Replay
	Log logr.Logger
	// PollEvery is how often settlement is checked; 500ms when zero.
	PollEvery time.Duration
}

// Run executes (or resumes) the replay and returns the final counts. It returns
// ErrCanaryFailed (wrapped) when the canary stopped it.
func (r *Replayer) Run(ctx context.Context) (Result, error) {
	if r.PollEvery == 0 {
		r.PollEvery = 500 * time.Millisecond
	}
	if err := schema.Verify(ctx, r.DB, r.Cfg.T); err != nil {
		return Result{}, err
	}
	ids, res, finished, err := r.begin(ctx)
	if err != nil || finished {
		return res, err
	}
	log := r.Log.WithValues("replayId", r.Cfg.ReplayID, "matched", len(ids))
	if r.Cfg.DryRun {
		log.Info("dry run: nothing replayed")
		return r.finish(ctx, ids, 0, PhaseSucceeded)
	}

	// ids[:done] were handed back already (by this run or an earlier one of the same
	// replay id): the hand-back goes in order and records its progress atomically.
	done := res.Replayed
	canary := min(r.Cfg.CanarySize, len(ids))
	// A run that stopped after the canary's hand-back but before the rest judges the
	// canary again on resume.
	if canary > 0 && done <= canary {
		log.Info("replaying canary", "canary", canary)
		if done < canary {
			if err := r.handBack(ctx, ids, done, canary); err != nil {
				return res, err
			}
		}
		done = canary
		c, err := r.settle(ctx, ids[:canary])
		if err != nil {
			return res, err
		}
		if c.dead*100 > r.Cfg.MaxNewDeadPercent*canary {
			res, ferr := r.finish(ctx, ids, done, PhaseFailed)
			if ferr != nil {
				return res, ferr
			}
			return res, fmt.Errorf("%w: %d of %d canary events went DEAD again (limit %d%%); the rest was not replayed",
				ErrCanaryFailed, c.dead, canary, r.Cfg.MaxNewDeadPercent)
		}
		log.Info("canary passed", "sent", c.sent, "deadAgain", c.dead)
	}
	if err := r.handBackAtRate(ctx, ids, done); err != nil {
		return res, err
	}
	if _, err := r.settle(ctx, ids); err != nil {
		return res, err
	}
	res, err = r.finish(ctx, ids, len(ids), PhaseSucceeded)
	if err == nil {
		log.Info("replay finished", "replayed", res.Replayed, "succeeded", res.Succeeded, "deadAgain", res.DeadAgain)
	}
	return res, err
}

// begin records the replay, or loads it when this replay id ran before. finished is
// true when the recorded replay already ended (its counts are returned as they are).
func (r *Replayer) begin(ctx context.Context) (ids []string, res Result, finished bool, err error) {
	audit := r.Cfg.T.WithSuffix(schema.ReplayAuditSuffix).Qualified()
	var phase string
	var raw []byte
	err = r.DB.QueryRowContext(ctx, `SELECT phase, event_ids, matched, replayed, succeeded, dead_again FROM `+audit+
		` WHERE replay_id = $1`, r.Cfg.ReplayID).Scan(&phase, &raw, &res.Matched, &res.Replayed, &res.Succeeded, &res.DeadAgain)
	switch {
	case err == nil:
		res.Phase = phase
		if phase == PhaseFailed {
			return nil, res, true, fmt.Errorf("%w: replay %s already failed; create a new replay after fixing the cause", ErrCanaryFailed, r.Cfg.ReplayID)
		}
		if phase == PhaseSucceeded {
			return nil, res, true, nil
		}
		if err := json.Unmarshal(raw, &ids); err != nil {
			return nil, res, false, fmt.Errorf("read audit of replay %s: %w", r.Cfg.ReplayID, err)
		}
		r.Log.Info("resuming replay", "replayId", r.Cfg.ReplayID, "matched", len(ids))
		return ids, res, false, nil
	case !errors.Is(err, sql.ErrNoRows):
		return nil, res, false, fmt.Errorf("read audit of replay %s: %w", r.Cfg.ReplayID, err)
	}

	if ids, err = r.match(ctx); err != nil {
		return nil, res, false, err
	}
	sel, _ := json.Marshal(r.Cfg.Selector)
	idsJSON, _ := json.Marshal(ids)
	_, err = r.DB.ExecContext(ctx, `INSERT INTO `+audit+` (replay_id, requested_by, reason, selector, dry_run, phase, matched, event_ids)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (replay_id) DO NOTHING`,
		r.Cfg.ReplayID, r.Cfg.RequestedBy, r.Cfg.Reason, sel, r.Cfg.DryRun, PhaseRunning, len(ids), idsJSON)
	if err != nil {
		return nil, res, false, fmt.Errorf("write audit of replay %s: %w", r.Cfg.ReplayID, err)
	}
	return ids, Result{Phase: PhaseRunning, Matched: len(ids)}, false, nil
}

// match selects the DEAD rows once, in per-aggregate version order.
func (r *Replayer) match(ctx context.Context) ([]string, error) {
	s := r.Cfg.Selector
	var where []string
	args := []any{schema.StatusDead}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if len(s.EventIDs) > 0 {
		add("event_id = ANY($%d)", pq.Array(s.EventIDs))
	}
	for _, f := range []struct{ col, v string }{
		{"event_type", s.EventType}, {"aggregate_type", s.AggregateType}, {"aggregate_id", s.AggregateID},
		{"last_error_code", s.ErrorCode}, {"destination", s.Destination},
	} {
		if f.v != "" {
			add(f.col+" = $%d", f.v)
		}
	}
	if s.CreatedAfter != nil {
		add("created_at >= $%d", *s.CreatedAfter)
	}
	if s.CreatedBefore != nil {
		add("created_at < $%d", *s.CreatedBefore)
	}
	args = append(args, r.Cfg.MaxEvents+1)
	q := `SELECT event_id FROM ` + r.Cfg.T.Qualified() + ` WHERE status = $1`
	if len(where) > 0 {
		q += ` AND ` + strings.Join(where, " AND ")
	}
	q += fmt.Sprintf(` ORDER BY aggregate_type, aggregate_id, aggregate_version LIMIT $%d`, len(args))
	rows, err := r.DB.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("select DEAD events: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("select DEAD events: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select DEAD events: %w", err)
	}
	if len(ids) > r.Cfg.MaxEvents {
		return nil, fmt.Errorf("selector matches more than %d DEAD events; narrow it or raise --max-events", r.Cfg.MaxEvents)
	}
	return ids, nil
}

// handBack moves ids[from:to] back to PENDING for the relay and records `to` as the
// replay's progress in the same transaction, so a resumed run knows exactly which rows
// it handed back. Rows no longer DEAD (archived, or replayed by someone else) are left
// alone.
func (r *Replayer) handBack(ctx context.Context, ids []string, from, to int) error {
	tx, err := r.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("hand events back to the relay: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if _, err := tx.ExecContext(ctx, `UPDATE `+r.Cfg.T.Qualified()+`
		SET status = 'PENDING', retry_count = 0, next_retry_at = now(), owner_token = NULL, lease_until = NULL,
		    last_error_code = 'REPLAYED',
		    last_error_message = left('replay ' || $2 || ' after ' || coalesce(last_error_code, '') || ': ' || coalesce(last_error_message, ''), 512),
		    updated_at = now()
		WHERE event_id = ANY($1) AND status = 'DEAD'`, pq.Array(ids[from:to]), r.Cfg.ReplayID); err != nil {
		return fmt.Errorf("hand events back to the relay: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE `+r.Cfg.T.WithSuffix(schema.ReplayAuditSuffix).Qualified()+
		` SET replayed = $2 WHERE replay_id = $1`, r.Cfg.ReplayID, to); err != nil {
		return fmt.Errorf("record replay progress: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("hand events back to the relay: %w", err)
	}
	return nil
}

// handBackAtRate hands ids[from:] back in slices of a tenth of a second's worth.
func (r *Replayer) handBackAtRate(ctx context.Context, ids []string, from int) error {
	chunk := max(1, r.Cfg.Rate/10)
	tick := time.NewTicker(time.Second * time.Duration(chunk) / time.Duration(r.Cfg.Rate))
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

// settle waits until every id is SENT or DEAD (or gone: archived after SENT).
func (r *Replayer) settle(ctx context.Context, ids []string) (counts, error) {
	deadline := time.Now().Add(r.Cfg.SettleTimeout)
	for {
		c, err := r.count(ctx, ids)
		if err != nil {
			return c, err
		}
		if c.inflight == 0 {
			return c, nil
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("%d replayed events are still in flight after %s; is the relay running?", c.inflight, r.Cfg.SettleTimeout)
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-time.After(r.PollEvery):
		}
	}
}

func (r *Replayer) count(ctx context.Context, ids []string) (counts, error) {
	var c counts
	err := r.DB.QueryRowContext(ctx, `SELECT
		count(*) FILTER (WHERE status = 'SENT'),
		count(*) FILTER (WHERE status = 'DEAD'),
		count(*) FILTER (WHERE status IN ('PENDING', 'SENDING', 'RETRY'))
		FROM `+r.Cfg.T.Qualified()+` WHERE event_id = ANY($1)`, pq.Array(ids)).Scan(&c.sent, &c.dead, &c.inflight)
	if err != nil {
		return c, fmt.Errorf("count replayed events: %w", err)
	}
	return c, nil
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
	_, err := r.DB.ExecContext(ctx, `UPDATE `+r.Cfg.T.WithSuffix(schema.ReplayAuditSuffix).Qualified()+`
		SET phase = $2, replayed = $3, succeeded = $4, dead_again = $5, finished_at = now() WHERE replay_id = $1`,
		r.Cfg.ReplayID, phase, res.Replayed, res.Succeeded, res.DeadAgain)
	if err != nil {
		return res, fmt.Errorf("finish audit of replay %s: %w", r.Cfg.ReplayID, err)
	}
	return res, nil
}
