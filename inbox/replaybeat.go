package inbox

import (
	"context"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/startstop"
)

// heartbeat keeps a running replay's heartbeat_at current every ReplayLease/4 until
// the returned stop is called, so a handler that runs longer than the lease does not
// let another consumer of the group take the replay over and run it twice. A failed
// beat is logged and tried again at the next tick: one lost beat is not a lost lease.
func (c *Consumer) heartbeat(ctx context.Context, id int64) (stop func()) {
	return startstop.Start(ctx, func(ctx context.Context) {
		t := time.NewTicker(c.o.ReplayLease / 4)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := c.s.beatReplay(ctx, id); err != nil && ctx.Err() == nil {
				c.o.Log.Error(err, "could not record the replay's heartbeat; trying again", "consumerGroup", c.s.group,
					"replayId", id, "replayLease", c.o.ReplayLease.String())
			}
		}
	}).Stop
}

func (s *Store) beatReplay(ctx context.Context, id int64) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE `+s.replays+` SET heartbeat_at = now()
WHERE replay_id = $1 AND status = 'RUNNING'`, id); err != nil {
		return storeErr("heartbeat of replay %d: %w", id, err)
	}
	return nil
}

// waitStore runs op until it succeeds or fails with anything but a passing fault of
// the consumer database, waiting such faults out for at most MaxStoreWait. A replay
// uses it so that a database restart pauses it instead of failing it.
func (c *Consumer) waitStore(ctx context.Context, replayID int64, topic, what string, op func() error) error {
	var faults storeWait
	for {
		err := op()
		if err == nil || !storeFault(err) || ctx.Err() != nil || !faults.within(c.o.MaxStoreWait) {
			return err
		}
		if topic != "" { // a step for the whole replay has no topic to label it with
			c.o.Metrics.storeFault(c.s.group, topic)
		}
		c.o.Log.Error(err, "consumer database failed during a replay; waiting", "consumerGroup", c.s.group,
			"replayId", replayID, "step", what, "attempt", faults.n, "source", "consumer database")
		if err := sleep(ctx, c.retry.Delay(faults.n)); err != nil {
			return err
		}
	}
}
