package inbox

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// serveReplays takes the group's replay requests (RequestReplay) one at a time and
// runs them, until ctx ends. With several consumers of a group running, one takes
// each request (SKIP LOCKED); another finishes it if that one dies.
func (c *Consumer) serveReplays(ctx context.Context) {
	if c.o.ReplayPoll < 0 {
		return
	}
	for {
		id, rate, err := c.s.takeReplay(ctx, c.o.ReplayLease)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			c.o.Log.Error(err, "could not read replay requests; retrying", "consumerGroup", c.s.group)
		default:
			res, err := c.runReplay(ctx, id, rate)
			if err != nil && ctx.Err() == nil {
				c.o.Log.Error(err, "replay failed", "consumerGroup", c.s.group, "replayId", id)
			} else if err == nil {
				c.o.Log.Info("replay done", "consumerGroup", c.s.group, "replayId", id, "selected", res.Selected,
					"applied", res.Applied, "duplicates", res.Duplicates, "failed", res.Failed)
			}
			continue // there may be another
		}
		if sleep(ctx, c.o.ReplayPoll) != nil {
			return
		}
	}
}

// takeReplay claims the oldest REQUESTED replay of the group, or a RUNNING one
// without a heartbeat for lease (its consumer died mid-replay).
func (s *Store) takeReplay(ctx context.Context, lease time.Duration) (id int64, rate float64, err error) {
	err = s.db.QueryRowContext(ctx, `UPDATE `+s.replays+` SET status = 'RUNNING',
    started_at = COALESCE(started_at, now()), heartbeat_at = now()
WHERE replay_id = (
    SELECT replay_id FROM `+s.replays+`
    WHERE consumer_group = $1 AND (status = 'REQUESTED'
       OR status = 'RUNNING' AND heartbeat_at < now() - make_interval(secs => $2))
    ORDER BY replay_id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING replay_id, rate`, s.group, lease.Seconds()).Scan(&id, &rate)
	return id, rate, err
}
