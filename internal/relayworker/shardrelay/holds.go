// holds.go: the hold table's due rows (RETRY whose time has come, HELD with no RETRY
// below them), published in aggregate-version order and settled, fenced by the shard
// leases (shardstore.Transition decides each row's next state).

package shardrelay

import (
	"context"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardstore"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/verdict"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// dueHolds publishes up to a batch of due hold rows of the leased shards and settles
// them. Rows the brokers refused as a whole are not settled (no attempt counted).
func (r *Relay) dueHolds(ctx, work context.Context) (round, error) {
	tokens := r.leases.Tokens()
	if len(tokens) == 0 {
		return round{}, nil
	}
	rows, err := r.st.DueHolds(work, tokens, r.cfg.BatchSize)
	if err != nil || len(rows) == 0 {
		return round{}, err
	}
	var shards []int16
	items := make([]item, len(rows))
	for i := range rows {
		// The grace of a missing topic counts from created_at; a hold row carries no
		// age from the database, so it is taken on the worker clock here.
		rows[i].Age = time.Since(rows[i].CreatedAt)
		items[i] = r.newItem(&rows[i].Row)
		shards = append(shards, rows[i].Shard)
	}
	s := r.send(work, items, r.deadline(shards))
	shutdown := work.Err() != nil
	if s.down {
		return s.round, nil
	}
	var st []shardstore.Settlement
	var counted []countedHold
	blocked := map[shardstore.AggregateKey]bool{}
	for i := range rows {
		v := r.decide(items, &s, i, shutdown)
		agg := items[i].agg
		if blocked[agg] && v.Kind != verdict.Sent {
			continue // behind an older version that stays: unchanged
		}
		x, ok := settle(rows[i], v, r.cfg.MaxAttempts)
		if v.Kind != verdict.Sent && v.Kind != verdict.Dead && (!ok || x.State != schema.StatusDead) {
			blocked[agg] = true
		}
		if !ok {
			continue
		}
		st = append(st, x)
		counted = append(counted, countedHold{dest: rows[i].Destination, s: x, tried: v.Kind != verdict.Release})
	}
	if len(st) == 0 {
		return s.round, nil
	}
	c, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	n, err := r.st.Settle(c, st)
	if err != nil {
		r.m.Errors.WithLabelValues("mark").Inc()
		return s.round, err
	}
	if lost := len(st) - n; lost > 0 {
		// Those shards' leases were taken over: their new owner tries the rows again;
		// the next lease round drops them here.
		r.m.MarkFenced.Add(float64(lost))
		r.log.Info("lease lost before settling hold rows; another worker owns the shards", "rows", lost)
	}
	s.holds = n > 0
	var retried []shardstore.Hold
	for _, c := range counted {
		if c.s.Delete {
			r.m.SendSuccess.WithLabelValues(c.dest).Inc()
			continue
		}
		h := shardstore.Hold{EventID: c.s.EventID, State: c.s.State, Code: c.s.Code, Message: c.s.Message, RetryIn: c.s.RetryIn}
		r.countHold(c.dest, c.s.EventID, c.s.State, c.s.Code, c.tried, &retried, h)
	}
	if len(retried) > 0 {
		h := retried[0]
		r.log.Info("publish failed; scheduled retry", "rows", len(retried), "code", h.Code,
			"eventId", h.EventID, "error", h.Message, "delay", h.RetryIn.String())
	}
	return s.round, nil
}

// countedHold is a settlement and what its metrics need.
type countedHold struct {
	dest  string
	s     shardstore.Settlement
	tried bool
}

// settle is a due row's settlement after verdict v (shardstore.Transition). A release
// (never sent: held back, or shutdown) leaves the row as it is: still due, no attempt.
// A missing topic inside the grace is a retry without an attempt, also for a HELD row,
// which then becomes the RETRY that holds back the newer versions.
func settle(row shardstore.HoldRow, v verdict.Verdict, maxAttempts int) (shardstore.Settlement, bool) {
	switch {
	case v.Kind == verdict.Release:
		return shardstore.Settlement{}, false
	case v.Kind == verdict.Retry && v.Uncounted:
		return shardstore.Settlement{EventID: row.EventID, Token: row.Token, State: schema.StatusRetry,
			RetryIn: v.Delay, Code: v.Code, Message: v.Message}, true
	}
	return shardstore.Transition(row, result(v), maxAttempts)
}
