// background.go: the loops beside the claim loop: the LISTEN wake-up, the refresher
// of the backlog gauges and the worker's heartbeat, and the feed in
// logical-replication mode.

package relay

import (
	"context"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/wakeup"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/startstop"
)

// startBackground starts the background loops; the returned stop ends them and waits
// until they have returned. Without a DSN (tests) there is no LISTEN, only polling.
func (r *Relay) startBackground(ctx context.Context) (stop func()) {
	var loops []*startstop.Task
	if r.cfg.DSN != "" {
		loops = append(loops, startstop.Start(ctx, r.listen))
	}
	loops = append(loops, startstop.Start(ctx, r.stats))
	if r.cfg.Feed != nil {
		loops = append(loops, startstop.Start(ctx, r.cfg.Feed.Run))
	}
	return func() { startstop.StopAll(loops...) }
}

// listen wakes the loop on NOTIFY (wakeup.Listen).
func (r *Relay) listen(ctx context.Context) {
	wakeup.Listen(ctx, r.cfg.DSN, schema.Channel(r.cfg.Table), r.m, r.log, func(string) { r.wakeUp() }, nil)
}

// stats refreshes the gauges and the worker's heartbeat every StatsInterval.
func (r *Relay) stats(ctx context.Context) {
	t := time.NewTicker(r.cfg.StatsInterval)
	defer t.Stop()
	for {
		r.refreshGauges(ctx)
		r.reportWorker(ctx) // heartbeat: the operator ignores rows that stop beating
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// refreshGauges sets the backlog and table-health gauges; each read is bounded and a
// failure only counts an error (the gauges keep their last values).
func (r *Relay) refreshGauges(ctx context.Context) {
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if n, age, err := r.store.Backlog(c); err == nil {
		r.m.PendingCount.Set(float64(n))
		r.m.OldestPendingAge.Set(age.Seconds())
	} else if ctx.Err() == nil {
		r.m.Errors.WithLabelValues("stats").Inc()
	}
	if h, err := r.store.Health(c); err == nil {
		r.m.TableDeadTuples.Set(float64(h.DeadTuples))
		r.m.TableLiveTuples.Set(float64(h.LiveTuples))
		r.m.TableSizeBytes.Set(float64(h.SizeBytes))
	} else if ctx.Err() == nil {
		r.m.Errors.WithLabelValues("stats").Inc()
	}
}
