package shardstore

import (
	"fmt"
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/testenv/golden"
)

// TestStatementsMatchGoldenFiles: every statement the v2 relay sends, as it sends it,
// is in testdata/<name>.sql (rewrite them with -update), so a change to one reviews
// as an SQL diff.
func TestStatementsMatchGoldenFiles(t *testing.T) {
	tb := pgident.Table{Schema: "public", Name: "outbox_event"}
	golden.Statements(t, []golden.Statement{
		{Name: "tick_lock", About: "Tick, 1st statement: $1 the tick lock's key; returns seq_before and whether a tick looks needed; the tick commits asynchronously", SQL: tickLockSQL(tb)},
		{Name: "tick", About: "Tick, 2nd statement: $1 seq_before; records the tick only when needed", SQL: tickSQL(tb)},
		{Name: "tick_close_idle", About: "Tick, after its commit on every IdleTicks-th tick: $1 close empty windows whose lo_tick is below it (asynchronous commit)", SQL: closeIdleSQL(tb)},
		{Name: "least_lo_tick", About: "Tick's trim round, beside the loop: the least lo_tick of any shard", SQL: leastLoTickSQL(tb)},
		{Name: "tick_trim", About: "Tick's trim round: $1 where the last one stopped, $2 the least lo_tick (asynchronous commit)", SQL: trimTicksSQL(tb)},
		{Name: "trim_cursors", About: "Tick, after the tick trim: $1 tokens, $2 shards and $3 the newest cursor id the last trim kept; returns each held shard's newest id (asynchronous commit)", SQL: trimCursorsSQL(tb)},
		{Name: "read", About: fmt.Sprintf("Read (prepared on the read connection, %d shards): $1 tokens, $2 batch size, $3 first shard", schema.DefaultShards),
			SQL: readSQL(tb, schema.DefaultShards)},
		{Name: "advance", About: "Advance: $1 worker; windows $3-$7, $2 (lo ticks) and $17 (hi ticks' stamps); published $8-$9 and $16 (seqs); hold rows $10-$15", SQL: advanceSQL(tb)},
		{Name: "due_holds", About: "DueHolds: $1 tokens, $2 how many", SQL: dueHoldsSQL(tb)},
		{Name: "settle", About: "Settle: per row $1 event id, $2 token, $3 delete, $4 state, $5 count, $6 delay ms, $7 code, $8 message, $9 logged, $10 partition, $11 offset; $12 worker", SQL: settleSQL(tb)},
		{Name: "heartbeat", About: "Heartbeat: $1 worker id", SQL: heartbeatSQL(tb)},
		{Name: "lease_state", About: "LeaseState: $1 the lease (live = heartbeat within it)", SQL: leaseStateSQL(tb)},
		{Name: "acquire", About: "Acquire: $1 fresh token, $2 lease, $3 how many", SQL: acquireSQL(tb)},
		{Name: "renew", About: "Renew: $1 shards, $2 their tokens, $3 lease", SQL: renewSQL(tb)},
		{Name: "sweep_tokens", About: "Rebalance, after Renew: delete expired tokens that hold no shard", SQL: sweepTokensSQL(tb)},
		{Name: "release", About: "Release: $1 shards, $2 their tokens; at a window boundary only", SQL: releaseSQL(tb)},
		{Name: "release_all", About: "ReleaseAll: $1 shards, $2 their tokens", SQL: releaseAllSQL(tb)},
		{Name: "announce_release", About: "after a release, or a round that left the worker under its share: $1 the table's channel, $2 schema.LeasesReleased or schema.LeasesWanted", SQL: announceSQL},
		{Name: "leave", About: "ReleaseAll, then: $1 worker id", SQL: leaveSQL(tb)},
	})
}
