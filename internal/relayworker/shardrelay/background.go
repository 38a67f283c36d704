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
	listening := make(chan struct{})
	r.listening = listening
	if r.cfg.DSN != "" {
		var once sync.Once
		loops = append(loops, startstop.Start(ctx, func(ctx context.Context) {
			wakeup.Listen(ctx, r.cfg.DSN, schema.Channel(r.cfg.Table), r.m, r.log, r.wakeUp,
				func() { once.Do(func() { close(listening) }) })
		}))
	} else {
		close(listening)
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

// listenSetupWait bounds how long a starting worker waits for its LISTEN before its
// first lease round (awaitListening); LISTEN is acknowledged within milliseconds
// unless the database is unreachable, and then polling goes on without it.
const listenSetupWait = 5 * time.Second

// awaitListening waits until the LISTEN on the table's channel was set up (or
// failed), at most listenSetupWait: a joining worker's first lease round asks the
// others for shards (leases-wanted), and they release them at once and announce it;
// a worker not yet listening missed that announcement and left the released shards
// without an owner until its next round (lease/3 later: 10 s of stalled events in
// TestJoiningWorkerTakesReleasedShardsAtOnce under CI load).
func (r *Relay) awaitListening(ctx context.Context) {
	t := time.NewTimer(listenSetupWait)
	defer t.Stop()
	select {
	case <-r.listening:
	case <-ctx.Done():
	case <-t.C:
	}
}
