// background.go: the loops beside the relay loop: the LISTEN wake-up and the refresher
// of the table-health gauges and the worker's status row.

package shardrelay

import (
	"context"
	"sync"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/wakeup"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/startstop"
)

// startBackground starts the background loops; stop ends them and waits (once: later
// calls return at once).
func (r *Relay) startBackground(ctx context.Context) (stop func()) {
	var loops []*startstop.Task
	if r.cfg.DSN != "" {
		loops = append(loops, startstop.Start(ctx, func(ctx context.Context) {
			wakeup.Listen(ctx, r.cfg.DSN, schema.Channel(r.cfg.Table), r.m, r.log, r.wakeUp)
		}))
	}
	loops = append(loops, startstop.Start(ctx, r.stats))
	var once sync.Once
	return func() { once.Do(func() { startstop.StopAll(loops...) }) }
}

// stats refreshes the backlog and table-health gauges and the worker's status row
// every StatsInterval.
func (r *Relay) stats(ctx context.Context) {
	t := time.NewTicker(r.cfg.StatsInterval)
	defer t.Stop()
	for {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		r.refreshBacklog(c, ctx)
		if h, err := store.ReadTableHealth(c, r.db, r.cfg.Table); err == nil {
			r.m.TableDeadTuples.Set(float64(h.DeadTuples))
			r.m.TableLiveTuples.Set(float64(h.LiveTuples))
			r.m.TableSizeBytes.Set(float64(h.SizeBytes))
		} else if ctx.Err() == nil {
			r.m.Errors.WithLabelValues("stats").Inc()
		}
		cancel()
		r.reportWorker(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// refreshBacklog sets outbox_pending_count and outbox_oldest_pending_age_seconds from
// the operator's status read of the table (outboxstats, one bounded read-only
// transaction), so they mean what they mean on v1: the events not yet published
// (the committed rows of the shards' open windows, and the RETRY and HELD hold rows:
// v1's PENDING, SENDING and RETRY rows), and how long the oldest of them has waited.
// Past outboxstats.PendingCountBudget rows the count is extrapolated, as the
// status's. A failed read counts an error; the gauges keep their last values.
func (r *Relay) refreshBacklog(c, ctx context.Context) {
	s, err := outboxstats.Read(c, r.db, r.cfg.Table)
	if err != nil {
		if ctx.Err() == nil {
			r.m.Errors.WithLabelValues("stats").Inc()
		}
		return
	}
	r.m.PendingCount.Set(float64(s.Pending + s.Retrying))
	age := 0.0
	if !s.OldestPending.IsZero() {
		age = max(time.Since(s.OldestPending).Seconds(), 0)
	}
	r.m.OldestPendingAge.Set(age)
}
