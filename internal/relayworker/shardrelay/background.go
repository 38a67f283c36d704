// background.go: the loops beside the relay loop: the LISTEN wake-up and the refresher
// of the table-health gauges and the worker's status row.

package shardrelay

import (
	"context"
	"sync"
	"time"

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

// stats refreshes the table-health gauges and the worker's status row every
// StatsInterval. (The backlog gauges, outbox_pending_count and
// outbox_oldest_pending_age_seconds, are v1's: a v2 backlog is the shards' open
// windows, not counted yet.)
func (r *Relay) stats(ctx context.Context) {
	t := time.NewTicker(r.cfg.StatsInterval)
	defer t.Stop()
	for {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
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
