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

// duePart is the published due hold rows of a turn, to settle.
type duePart struct {
	rows     []shardstore.HoldRow
	items    []item
	s        sent
	shutdown bool
	settled  int // rows the settle changed
}

func (d *duePart) roundOf() round {
	if d == nil {
		return round{}
	}
	return d.s.round
}

// changed: the settle changed rows (sent ones are gone: the HELD rows behind them may
// be due now).
func (d *duePart) changed() bool { return d != nil && d.settled > 0 }

// publishDue publishes up to a batch of due hold rows of the leased shards (nil:
// none).
func (r *Relay) publishDue(work context.Context) (*duePart, error) {
	tokens := r.leases.Tokens()
	if len(tokens) == 0 {
		return nil, nil
	}
	rows, err := r.st.DueHolds(work, tokens, r.cfg.BatchSize)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	d := &duePart{rows: rows, items: make([]item, len(rows))}
	var shards []int16
	for i := range rows {
		// The grace of a missing topic counts from created_at; a hold row carries no
		// age from the database, so it is taken on the worker clock here.
		rows[i].Age = time.Since(rows[i].CreatedAt)
		d.items[i] = r.newItem(&rows[i].Row)
		shards = append(shards, rows[i].Shard)
	}
	d.s = r.send(work, d.items, r.deadline(shards))
	d.shutdown = work.Err() != nil
	return d, nil
}

// settleDue settles the rows d published, fenced by the shard leases; not when the
// brokers refused the turn as a whole (down) and d tried something: no attempt is
// counted, the rows stay due.
func (r *Relay) settleDue(d *duePart, down bool) error {
	if d == nil || down && d.s.triedAny() {
		return nil
	}
	var st []shardstore.Settlement
	var counted []countedHold
	blocked := map[shardstore.AggregateKey]bool{}
	for i := range d.rows {
		v := r.decide(d.items, &d.s, i, d.shutdown)
		agg := d.items[i].agg
		if blocked[agg] && v.Kind != verdict.Sent {
			continue // behind an older version that stays: unchanged
		}
		x, ok := settle(d.rows[i], v, r.cfg.MaxAttempts)
		if v.Kind != verdict.Sent && v.Kind != verdict.Dead && (!ok || x.State != schema.StatusDead) {
			blocked[agg] = true
		}
		if !ok {
			continue
		}
		if x.Delete {
			x.Logged, x.Partition, x.Offset = true, int32(d.s.res[i].Partition), d.s.res[i].Offset
		}
		st = append(st, x)
		counted = append(counted, countedHold{dest: d.rows[i].Destination, s: x, tried: v.Kind != verdict.Release})
	}
	if len(st) == 0 {
		return nil
	}
	c, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	n, err := r.st.Settle(c, st)
	if err != nil {
		r.m.Errors.WithLabelValues("mark").Inc()
		return err
	}
	d.settled = n
	if lost := len(st) - n; lost > 0 {
		// Those shards' leases were taken over: their new owner tries the rows again;
		// the next lease round drops them here.
		r.m.MarkFenced.Add(float64(lost))
		r.log.Info("lease lost before settling hold rows; another worker owns the shards", "rows", lost)
	}
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
	return nil
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
