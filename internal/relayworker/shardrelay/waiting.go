// waiting.go: does any event wait to be sent anywhere in the table? A paused worker
// whose own shards have nothing to send resumes only when nothing does (v1's rule:
// an idle worker neither reports the brokers down after the others drained the
// backlog nor up while their trials are still refused).

package shardrelay

import (
	"context"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// waiting reports whether a due RETRY hold row exists, or a shard has a row past its
// cursor (after pos, or after its lo tick's seq_after: a cheap probe per shard on
// (shard, seq) that may miss a transaction still straddling the tick, which only
// resumes the worker a little early; OFFSET 0 keeps it a probe: flattened, the
// planner may hash the whole outbox table instead, as it did with the tick's idle
// close). On a database error it says yes: stay paused.
func (r *Relay) waiting(ctx context.Context) bool {
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var w bool
	if err := r.db.QueryRowContext(c, waitingSQL(r.cfg.Table)).Scan(&w); err != nil {
		return true
	}
	return w
}

func waitingSQL(t pgident.Table) string {
	sh := t.WithSuffix(schema.ShardSuffix).Qualified()
	return `SELECT EXISTS (SELECT FROM ` + t.WithSuffix(schema.HoldSuffix).Qualified() + `
               WHERE state = '` + schema.StatusRetry + `' AND next_attempt_at <= now())
    OR EXISTS (SELECT FROM ` + sh + ` s JOIN ` + t.WithSuffix(schema.TickSuffix).Qualified() + ` lo ON lo.tick = s.lo_tick
               WHERE EXISTS (SELECT FROM ` + t.Qualified() + ` o WHERE o.shard = s.shard AND o.seq > COALESCE(s.pos, lo.seq_after) OFFSET 0))`
}
