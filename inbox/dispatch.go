package inbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/backoff"
	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/redact"
)

// CommandFunc makes one command's call. It must pass cmd.Key to the external system
// as the idempotency key. Return nil only when the call succeeded; wrap the error
// with Permanent when no retry can help (the command is parked), anything else is
// retried with backoff.
type CommandFunc func(ctx context.Context, cmd Command) error

// DispatchOptions tune Dispatch.
type DispatchOptions struct {
	// Batch is how many due commands one claim takes (default 10).
	Batch int
	// Lease is how long a claim is this dispatcher's (default 30s). A call must end
	// well within it: its context is cancelled at three quarters of the lease after
	// the claim, commands the pace did not reach by then are handed back uncalled,
	// and after the lease another dispatcher may make the call again (same key).
	Lease time.Duration
	// Poll is the wait when nothing is due (default 200ms).
	Poll time.Duration
	// MaxAttempts parks a command after this many failed calls (default 10).
	MaxAttempts int
	// Backoff and MaxBackoff space the retries (default 1s doubling to 5m, jittered).
	Backoff, MaxBackoff time.Duration
	// Rate bounds the calls per second (0: unbounded), for rate-limited downstreams
	// such as SMS gateways. A claim then takes at most Rate x Lease / 2 commands.
	Rate float64
	// Log receives one line per failed call and park (keys consumerGroup, kind,
	// idempotencyKey, attempt).
	Log logr.Logger
}

func (o DispatchOptions) withDefaults() DispatchOptions {
	if o.Batch <= 0 {
		o.Batch = 10
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 200 * time.Millisecond
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 10
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff < o.Backoff {
		o.MaxBackoff = max(5*time.Minute, o.Backoff)
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	return o
}

// claimed is a command this dispatcher holds.
type claimed struct {
	id  int64
	cmd Command
}

// Dispatch makes the calls of due commands until ctx ends. Several dispatchers may run
// (in several processes): each claims commands under its own owner token and lease,
// and marks a command only while it still owns it. A command is marked DONE only
// after its call returned success, never before: a crash in between means the call is
// made again with the same idempotency key.
func (c *Commands) Dispatch(ctx context.Context, fn CommandFunc, o DispatchOptions) error {
	o = o.withDefaults()
	retry := backoff.Policy{Min: o.Backoff, Max: o.MaxBackoff}
	var pace <-chan time.Time
	if o.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / o.Rate))
		defer t.Stop()
		pace = t.C
	}
	batch := o.Batch
	if o.Rate > 0 { // claim no more than the pace lets us call within half a lease
		batch = max(1, min(batch, int(o.Rate*o.Lease.Seconds()/2)))
	}
	for {
		token := newToken()
		claimedAt := time.Now()
		held, err := c.claim(ctx, token, batch, o.Lease)
		if err != nil && ctx.Err() == nil {
			o.Log.Error(err, "could not claim commands; retrying", "consumerGroup", c.group)
		}
		// Each call must end by 3/4 of the lease from the claim, the relay's rule.
		deadline := claimedAt.Add(o.Lease - contract.LeaseMargin(o.Lease))
		for i, cl := range held {
			if pace != nil {
				select {
				case <-ctx.Done():
				case <-pace:
				}
			}
			if ctx.Err() != nil || time.Now().After(deadline) {
				c.release(ctx, token, held[i:], o.Log) // not called: due again at once
				break
			}
			c.run(ctx, token, deadline, cl, fn, o, retry)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if len(held) == 0 {
			if err := sleep(ctx, o.Poll); err != nil {
				return err
			}
		}
	}
}

// release hands claimed commands that were not called back, so they are due at once
// (for any dispatcher) instead of after their lease.
func (c *Commands) release(ctx context.Context, token string, cls []claimed, log logr.Logger) {
	ids := make([]int64, len(cls))
	for i, cl := range cls {
		ids[i] = cl.id
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if _, err := c.db.ExecContext(rctx, `UPDATE `+c.table+` SET status = 'PENDING', owner_token = NULL, lease_until = NULL,
attempts = attempts - 1 WHERE command_id = ANY($1) AND owner_token = $2`, pq.Array(ids), token); err != nil {
		log.Error(err, "could not release unsent commands; they are due again after their lease", "consumerGroup", c.group)
	}
}

// claim takes due PENDING commands and RUNNING ones whose lease ran out.
func (c *Commands) claim(ctx context.Context, token string, batch int, lease time.Duration) ([]claimed, error) {
	rows, err := c.db.QueryContext(ctx, `UPDATE `+c.table+` t
SET status = 'RUNNING', owner_token = $2, lease_until = now() + make_interval(secs => $3), attempts = t.attempts + 1
WHERE t.command_id IN (
    SELECT command_id FROM `+c.table+`
    WHERE consumer_group = $1 AND next_attempt_at <= now()
      AND (status = 'PENDING' OR status = 'RUNNING' AND lease_until < now())
    ORDER BY next_attempt_at, command_id LIMIT $4 FOR UPDATE SKIP LOCKED)
RETURNING t.command_id, t.kind, t.idempotency_key, t.payload, t.attempts`, c.group, token, lease.Seconds(), batch)
	if err != nil {
		return nil, fmt.Errorf("inbox: claim commands: %w", err)
	}
	defer rows.Close()
	var out []claimed
	for rows.Next() {
		var cl claimed
		if err := rows.Scan(&cl.id, &cl.cmd.Kind, &cl.cmd.Key, &cl.cmd.Payload, &cl.cmd.Attempt); err != nil {
			return nil, fmt.Errorf("inbox: claim commands: %w", err)
		}
		out = append(out, cl)
	}
	return out, rows.Err()
}

// run makes one call and records its result, fenced by the owner token.
func (c *Commands) run(ctx context.Context, token string, deadline time.Time, cl claimed, fn CommandFunc, o DispatchOptions, retry backoff.Policy) {
	cctx, cancel := context.WithDeadline(ctx, deadline)
	err := callCommand(cctx, fn, cl.cmd)
	cancel()
	log := o.Log.WithValues("consumerGroup", c.group, "kind", cl.cmd.Kind, "idempotencyKey", cl.cmd.Key, "attempt", cl.cmd.Attempt)
	var res sql.Result
	var markErr error
	mctx := context.WithoutCancel(ctx) // the call happened: record it even when stopping
	switch {
	case err == nil:
		res, markErr = c.db.ExecContext(mctx, `UPDATE `+c.table+` SET status = 'DONE', done_at = now(), owner_token = NULL,
lease_until = NULL, last_error = NULL WHERE command_id = $1 AND owner_token = $2`, cl.id, token)
	case ClassOf(err) == ClassPermanent || cl.cmd.Attempt >= o.MaxAttempts:
		log.Info("command parked", "error", err.Error())
		res, markErr = c.db.ExecContext(mctx, `UPDATE `+c.table+` SET status = 'PARKED', owner_token = NULL, lease_until = NULL,
last_error = $3 WHERE command_id = $1 AND owner_token = $2`, cl.id, token, redact.Truncate(err.Error(), maxErrorMessage))
	default:
		log.Info("command failed; retrying", "error", err.Error())
		res, markErr = c.db.ExecContext(mctx, `UPDATE `+c.table+` SET status = 'PENDING', owner_token = NULL, lease_until = NULL,
last_error = $3, next_attempt_at = now() + make_interval(secs => $4) WHERE command_id = $1 AND owner_token = $2`,
			cl.id, token, redact.Truncate(err.Error(), maxErrorMessage), retry.Delay(cl.cmd.Attempt).Seconds())
	}
	if markErr != nil {
		log.Error(markErr, "could not record the command's result; it runs again after its lease")
		return
	}
	if n, _ := res.RowsAffected(); n == 0 {
		log.Info("lease lost before the result was recorded; another dispatcher owns the command")
	}
}

// callCommand runs fn and turns a panic into a permanent error.
func callCommand(ctx context.Context, fn CommandFunc, cmd Command) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Permanent(fmt.Errorf("%w (%T)", errPanic, p))
		}
	}()
	return fn(ctx, cmd)
}

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
