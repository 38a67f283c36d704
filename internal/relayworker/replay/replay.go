// Package replay implements `relayworker replay`: a controlled, audited replay of DEAD
// events (docs/worker-contract.md, "replay flags"; the states are docs/architecture.md,
// "State machine"). It does not publish by itself. It hands the selected rows back to
// the relay (v1: DEAD -> PENDING, retry_count 0; v2: the hold row DEAD -> RETRY,
// attempts 0; statements.go) so they go out with their ORIGINAL event ids, through
// the same per-aggregate ordering, fencing and retry rules as any event, and
// consumers' dedup and version guards absorb them:
//
//  1. select the matching DEAD rows once (match.go) and record the set, the selector,
//     who and why in <table>_replay_audit (audit.go; keyed by replay id: a re-run of
//     the Job resumes);
//  2. hand back a canary first and wait until it settled (SENT or DEAD again); stop
//     with phase Failed when too many went DEAD again;
//  3. hand back the rest at --rate events per second (handback.go), wait until they
//     settled, and record the counts and the finish time.
package replay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// Phases recorded in the audit table (the DeadLetterReplay status mirrors them).
const (
	PhaseRunning   = "Running"
	PhaseSucceeded = "Succeeded"
	PhaseFailed    = "Failed"
)

// ErrCanaryFailed: too many canary events went DEAD again; the rest was not replayed.
var ErrCanaryFailed = errors.New("canary failed")

// Options configure one replay (internal/relayworker/cli maps the replay flags to them).
type Options struct {
	Table             pgident.Table
	ReplayID          string // the audit key; a re-run with the same id resumes
	Reason            string
	RequestedBy       string
	Rate              int // events handed back per second
	CanarySize        int // 0: no canary
	MaxNewDeadPercent int
	DryRun            bool
	MaxEvents         int // refuse selectors matching more DEAD rows
	SettleTimeout     time.Duration
	Selector          Selector
	// PollEvery is how often settlement is checked; 500ms when zero.
	PollEvery time.Duration
}

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
	DB   *sql.DB
	Opts Options
	Log  logr.Logger

	sql statements // the table contract's, chosen by Run
}

// Run executes (or resumes) the replay and returns the final counts. It returns
// ErrCanaryFailed (wrapped) when the canary stopped it.
func (r *Replayer) Run(ctx context.Context) (Result, error) {
	if r.Opts.PollEvery == 0 {
		r.Opts.PollEvery = 500 * time.Millisecond
	}
	if err := r.verify(ctx); err != nil {
		return Result{}, err
	}
	ids, res, finished, err := r.begin(ctx)
	if err != nil || finished {
		return res, err
	}
	log := r.Log.WithValues("replayId", r.Opts.ReplayID, "matched", len(ids))
	if r.Opts.DryRun {
		log.Info("dry run: nothing replayed")
		return r.finish(ctx, ids, 0, PhaseSucceeded)
	}
	// ids[:done] were handed back already (by this run or an earlier one of the same
	// replay id): the hand-back goes in order and records its progress atomically.
	done, res, err := r.canary(ctx, log, ids, res)
	if err != nil {
		return res, err
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

// canary hands back the canary (unless res says it went back already) and judges it.
// It returns how many ids are handed back once the canary passed, and an error
// wrapping ErrCanaryFailed (after recording phase Failed) when too many went DEAD
// again. A run that stopped after the canary's hand-back but before the rest judges
// the canary again on resume.
func (r *Replayer) canary(ctx context.Context, log logr.Logger, ids []string, res Result) (int, Result, error) {
	done := res.Replayed
	canary := min(r.Opts.CanarySize, len(ids))
	if canary == 0 || done > canary {
		return done, res, nil
	}
	log.Info("replaying canary", "canary", canary)
	if done < canary {
		if err := r.handBack(ctx, ids, done, canary); err != nil {
			return done, res, err
		}
	}
	c, err := r.settle(ctx, ids[:canary])
	if err != nil {
		return canary, res, err
	}
	if c.dead*100 > r.Opts.MaxNewDeadPercent*canary {
		res, ferr := r.finish(ctx, ids, canary, PhaseFailed)
		if ferr != nil {
			return canary, res, ferr
		}
		return canary, res, fmt.Errorf("%w: %d of %d canary events went DEAD again (limit %d%%); the rest was not replayed",
			ErrCanaryFailed, c.dead, canary, r.Opts.MaxNewDeadPercent)
	}
	log.Info("canary passed", "sent", c.sent, "deadAgain", c.dead)
	return canary, res, nil
}

// verify checks the table as its contract's relay does and picks the contract's
// statements: a table the relay would refuse is refused here too, with its line.
func (r *Replayer) verify(ctx context.Context) error {
	c, err := schema.DetectContract(ctx, r.DB, r.Opts.Table)
	if err != nil {
		return err
	}
	if c.Version == schema.ContractV2 {
		if _, err := schema.VerifyV2(ctx, r.DB, r.Opts.Table, 0); err != nil {
			return err
		}
		// A table made by an earlier v2 migrate has no audit table yet.
		var audit bool
		if err := r.DB.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, auditTable(r.Opts.Table)).Scan(&audit); err != nil {
			return fmt.Errorf("check table %s: %w", r.Opts.Table, err)
		}
		if !audit {
			return fmt.Errorf("outbox table %s has no replay audit table %s (run `relayworker migrate`)",
				r.Opts.Table, r.Opts.Table.WithSuffix(schema.ReplayAuditSuffix))
		}
	} else if err := schema.Verify(ctx, r.DB, r.Opts.Table); err != nil {
		return err
	}
	r.sql = statementsFor(r.Opts.Table, c.Version)
	return nil
}
