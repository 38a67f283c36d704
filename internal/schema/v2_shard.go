// v2_shard.go: where a v2 table's shards stand (docs/contract-v2.md, "The cursor
// log"). Three tables, none of them updated per batch, and a view that joins them:
//   - <table>_lease: one row per shard, the token that holds it (NULL: free). Written
//     only when a lease is taken or given up; the fence of every write a worker makes
//     for a shard is a lock on this row with its token in it.
//   - <table>_token: one row per lease token, until when its leases last. A worker's
//     renewal writes one row per token it holds (one per acquisition), not one per
//     shard.
//   - <table>_cursor: the cursor log. An advance inserts a shard's new cursor (lo_tick,
//     hi_tick, pos); the newest row of a shard is its cursor, found by one backward
//     probe of the primary key. Older rows are trimmed by the shard's owner.
//   - <table>_shard: the view of the three, one row per shard as the shard table of
//     earlier builds had it (owner, lease_until, lo_tick, hi_tick, pos), for the
//     statements that read every shard now and then (status, archive, trace).
//
// Why a log: a row updated in place leaves a version behind per update, and while any
// transaction in the cluster stays open none of them can be pruned; every read of the
// row walks them. Updated once per batch, the shard rows were the whole cost of an
// open write transaction (32x the p99 after ten minutes, docs/contract-v2.md). An
// insert leaves nothing behind that the newest-row probe has to walk.

package schema

import (
	"strconv"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// NewestCursor is the SQL of shard expr's cursor (the newest row of the cursor log),
// as a subquery of the columns cols (e.g. "c.lo_tick, c.hi_tick, c.pos").
func NewestCursor(t pgident.Table, expr, cols string) string {
	return `(SELECT ` + cols + ` FROM ` + t.WithSuffix(CursorSuffix).Qualified() + ` c
      WHERE c.shard = ` + expr + ` ORDER BY c.id DESC LIMIT 1)`
}

// shardStateStatements create the lease, token and cursor tables of a table of n
// shards, convert the shard table of an earlier build into them, seed every shard's
// row and first cursor (at the newest tick), and (re)create the view; each is
// idempotent. They run after the first tick exists.
func shardStateStatements(t pgident.Table, n int) []string {
	lease := t.WithSuffix(LeaseSuffix).Qualified()
	token := t.WithSuffix(TokenSuffix).Qualified()
	cursor := t.WithSuffix(CursorSuffix).Qualified()
	tick := t.WithSuffix(TickSuffix).Qualified()
	last := strconv.Itoa(n - 1)
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + lease + ` (
    shard smallint PRIMARY KEY,
    owner text     NULL
)`,
		`CREATE TABLE IF NOT EXISTS ` + token + ` (
    token       text        PRIMARY KEY,
    lease_until timestamptz NOT NULL
)`,
		// id orders a shard's rows: the writers of a shard take its lease row's lock
		// before they draw an id, so a shard's ids ascend in commit order.
		`CREATE TABLE IF NOT EXISTS ` + cursor + ` (
    shard   smallint    NOT NULL,
    id      bigint      GENERATED ALWAYS AS IDENTITY,
    lo_tick bigint      NOT NULL,
    hi_tick bigint      NULL,
    pos     bigint      NULL,
    at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (shard, id)
)`,
		convertShardTableSQL(t),
		`DELETE FROM ` + lease + ` WHERE shard > ` + last,
		`DELETE FROM ` + cursor + ` WHERE shard > ` + last,
		`INSERT INTO ` + lease + ` (shard) SELECT g FROM generate_series(0, ` + last + `) g ON CONFLICT (shard) DO NOTHING`,
		`INSERT INTO ` + cursor + ` (shard, lo_tick)
SELECT g, (SELECT max(tick) FROM ` + tick + `) FROM generate_series(0, ` + last + `) g
WHERE NOT EXISTS (SELECT FROM ` + cursor + ` c WHERE c.shard = g)`,
		`CREATE OR REPLACE VIEW ` + t.WithSuffix(ShardSuffix).Qualified() + ` AS
SELECT l.shard, l.owner, k.lease_until, c.lo_tick, c.hi_tick, c.pos
FROM ` + lease + ` l
LEFT JOIN ` + token + ` k ON k.token = l.owner
CROSS JOIN LATERAL ` + NewestCursor(t, "l.shard", "c.lo_tick, c.hi_tick, c.pos") + ` c`,
	}
}

// convertShardTableSQL moves the shard table of an earlier build (a table, updated in
// place) into the lease, token and cursor tables and drops it, under an ACCESS
// EXCLUSIVE lock (within the migrate's lock_timeout) so no worker of that build
// advances a cursor meanwhile. After it, such a worker's statements fail (the shard
// table is a view it cannot update): it stops instead of writing where no reader
// looks. The status view reads the shard table, so it goes first; V2Statements
// creates it again.
func convertShardTableSQL(t pgident.Table) string {
	shard := t.WithSuffix(ShardSuffix).Qualified()
	return `DO $$BEGIN
    IF EXISTS (SELECT FROM pg_class WHERE oid = to_regclass(` + pgident.QuoteLiteral(shard) + `) AND relkind = 'r') THEN
        LOCK TABLE ` + shard + ` IN ACCESS EXCLUSIVE MODE;
        DROP VIEW IF EXISTS ` + t.WithSuffix(StatusViewSuffix).Qualified() + `;
        INSERT INTO ` + t.WithSuffix(LeaseSuffix).Qualified() + ` (shard, owner)
            SELECT shard, owner FROM ` + shard + ` ON CONFLICT (shard) DO NOTHING;
        INSERT INTO ` + t.WithSuffix(TokenSuffix).Qualified() + ` (token, lease_until)
            SELECT owner, max(lease_until) FROM ` + shard + `
            WHERE owner IS NOT NULL AND lease_until IS NOT NULL GROUP BY owner ON CONFLICT (token) DO NOTHING;
        INSERT INTO ` + t.WithSuffix(CursorSuffix).Qualified() + ` (shard, lo_tick, hi_tick, pos)
            SELECT shard, lo_tick, hi_tick, pos FROM ` + shard + ` ORDER BY shard;
        DROP TABLE ` + shard + `;
    END IF;
END$$`
}
