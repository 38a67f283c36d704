// gate_sql.go: the SQL of issue 21's gate spike, the table contract v2 hot path
// (docs/contract-v2.md): an insert-only outbox table, shard leases, a snapshot cursor
// per shard over shared ticks, and a fenced cursor advance that writes the batch log.
// The names are fixed (the spike runs in a fresh database of its own).

package main

import "strconv"

// gateShards is the number of shards the aggregate key hashes to.
const gateShards = 256

// gateDDL creates the v2 tables. The row order of defaults does not matter: seq's
// default calls pg_current_xact_id() first, so the transaction has its id before it
// draws a sequence number (the read's lower bound relies on that, see gateReadSQL).
func gateDDL() []string {
	return []string{
		`CREATE SEQUENCE outbox_v2_seq CACHE 1`,
		`CREATE TABLE outbox_v2 (
    event_id           text        PRIMARY KEY,
    aggregate_type     text        NOT NULL,
    aggregate_id       text        NOT NULL,
    aggregate_version  bigint      NOT NULL,
    event_type         text        NOT NULL,
    event_version      int         NOT NULL DEFAULT 1,
    destination        text        NOT NULL,
    message_key        text        NOT NULL,
    payload            jsonb       NOT NULL,
    headers            jsonb       NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    txid               xid8        NOT NULL DEFAULT pg_current_xact_id(),
    seq                bigint      NOT NULL DEFAULT (CASE WHEN pg_current_xact_id() IS NOT NULL THEN nextval('outbox_v2_seq') END),
    shard              smallint    NOT NULL GENERATED ALWAYS AS
                       ((hashtextextended(aggregate_type || '/' || aggregate_id, 0) & ` + strconv.Itoa(gateShards-1) + `)::smallint) STORED
)`,
		`CREATE UNIQUE INDEX outbox_v2_aggregate_version_key ON outbox_v2 (aggregate_type, aggregate_id, aggregate_version)`,
		// The read: one ordered range scan per shard.
		`CREATE INDEX outbox_v2_shard_seq_idx ON outbox_v2 (shard, seq)`,
		// Rows of transactions that straddled a tick, by id (PgQ indexes ev_txid the same way).
		`CREATE INDEX outbox_v2_shard_txid_idx ON outbox_v2 (shard, txid)`,
		`CREATE TABLE outbox_v2_tick (
    tick       bigint      PRIMARY KEY,
    snap       pg_snapshot NOT NULL,
    snap_xmax  xid8        NOT NULL,
    seq_before bigint      NOT NULL,
    seq_after  bigint      NOT NULL,
    at         timestamptz NOT NULL DEFAULT now()
)`,
		`CREATE INDEX outbox_v2_tick_xmax_idx ON outbox_v2_tick (snap_xmax)`,
		// fillfactor 50: every advance is a HOT update (no indexed column changes).
		`CREATE TABLE outbox_v2_shard (
    shard       smallint    PRIMARY KEY,
    owner       text        NULL,
    lease_until timestamptz NULL,
    lo_tick     bigint      NOT NULL,
    hi_tick     bigint      NULL,
    pos         bigint      NULL
) WITH (fillfactor = 50)`,
		`CREATE TABLE outbox_v2_batch (
    batch      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner      text        NOT NULL,
    shards     smallint[]  NOT NULL,
    last_seq   bigint[]    NOT NULL,
    hi_tick    bigint[]    NOT NULL,
    partitions int[]       NOT NULL,
    offsets    bigint[]    NOT NULL,
    at         timestamptz NOT NULL DEFAULT now()
)`,
	}
}

// gateTickSQL records a tick: the sequence's value read before the snapshot (every
// row of a transaction that got its id after the snapshot has a larger seq), the
// snapshot, and the sequence's value read after it (every row visible in the
// snapshot has a seq at most that). One simple query, so one round trip; the lock
// serialises ticks and each statement takes its own snapshot (READ COMMITTED).
const gateTickSQL = `BEGIN;
SELECT pg_advisory_xact_lock(2121),
       set_config('outbox.seq_before', COALESCE(pg_sequence_last_value('outbox_v2_seq'), 0)::text, true);
INSERT INTO outbox_v2_tick (tick, snap, snap_xmax, seq_before, seq_after)
SELECT COALESCE(max(tick), 0) + 1, pg_current_snapshot(), pg_snapshot_xmax(pg_current_snapshot()),
       current_setting('outbox.seq_before')::bigint, COALESCE(pg_sequence_last_value('outbox_v2_seq'), 0)
FROM outbox_v2_tick;
COMMIT`

// gateReadSQL reads up to $2 events of the shards that owner token $1 holds, shard
// by shard starting after shard $3 (round robin), each shard's in seq order.
//
// A shard's window is (lo, hi]: the transactions visible in tick hi and not in tick
// lo (PgQ's two-snapshot diff). hi is fixed while a window is read in parts (pos =
// the last seq published), otherwise it is the newest tick. The window's rows are
//   - by seq in (lo.seq_before, hi.seq_after], those visible in hi and not in lo: one
//     ordered range scan of (shard, seq);
//   - and the rows of transactions that were running at lo and ended by hi (the xip
//     of lo visible in hi) with seq <= lo.seq_before: by (shard, txid). They come
//     first (their seq is lower than every row of the first part).
//
// A late-committing transaction with a lower txid is in the second part of the
// window its commit falls in, whatever its seq, so nothing is skipped and nothing
// stalls behind a long transaction. Per-aggregate order: seq is drawn at insert, so
// for writers serialised on an aggregate a newer version has a larger seq, and its
// window is never before the older one's.
//
// A sentinel row (seq NULL) follows a shard's rows when the shard was read in parts
// before (pos set): it says the window is exhausted, so the advance can close it.
var gateReadSQL = `WITH nw AS (SELECT tick, snap, seq_after FROM outbox_v2_tick ORDER BY tick DESC LIMIT 1),
w AS (
    SELECT s.shard, s.pos, lo.snap AS lo_snap, lo.seq_before AS lo_seq,
           COALESCE(fx.tick, nw.tick) AS hi_tick, COALESCE(fx.snap, nw.snap) AS hi_snap,
           COALESCE(fx.seq_after, nw.seq_after) AS hi_seq
    FROM outbox_v2_shard s
    JOIN outbox_v2_tick lo ON lo.tick = s.lo_tick
    LEFT JOIN outbox_v2_tick fx ON fx.tick = s.hi_tick
    CROSS JOIN nw
    WHERE s.owner = $1
    ORDER BY (s.shard - $3::int + ` + strconv.Itoa(gateShards) + `) % ` + strconv.Itoa(gateShards) + `
)
SELECT w.shard, w.hi_tick, e.seq, e.event_id, e.aggregate_type, e.aggregate_id, e.aggregate_version,
       e.event_type, e.event_version, e.destination, e.message_key, e.payload, e.headers
FROM w CROSS JOIN LATERAL (
    (SELECT o.seq, o.event_id, o.aggregate_type, o.aggregate_id, o.aggregate_version, o.event_type,
            o.event_version, o.destination, o.message_key, o.payload, o.headers
     FROM outbox_v2 o
     WHERE o.shard = w.shard AND o.seq + 0 > COALESCE(w.pos, 0) AND o.seq + 0 <= w.lo_seq
       AND o.txid = ANY (ARRAY(SELECT x FROM pg_snapshot_xip(w.lo_snap) x WHERE pg_visible_in_snapshot(x, w.hi_snap)))
     ORDER BY o.seq LIMIT $2)
    UNION ALL
    (SELECT o.seq, o.event_id, o.aggregate_type, o.aggregate_id, o.aggregate_version, o.event_type,
            o.event_version, o.destination, o.message_key, o.payload, o.headers
     FROM outbox_v2 o
     WHERE o.shard = w.shard AND o.seq > GREATEST(w.pos, w.lo_seq) AND o.seq <= w.hi_seq
       AND pg_visible_in_snapshot(o.txid, w.hi_snap) AND NOT pg_visible_in_snapshot(o.txid, w.lo_snap)
     ORDER BY o.seq LIMIT $2)
    UNION ALL
    SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE w.pos IS NOT NULL
) e
LIMIT $2`

// gateReadSettings hold for the reading connections. Without them the planner
// reads a shard's whole window with a bitmap scan and sorts it for every batch
// (measured: 34-56 ms instead of 2 ms for 500 of 3,900 rows), and re-plans the
// statement on every call (1.5-5 ms); no JIT, as shardstore.ReadSettings says.
var gateReadSettings = []string{`SET enable_bitmapscan = off`, `SET plan_cache_mode = force_generic_plan`, `SET jit = off`}

// gateAdvanceSQL is the fenced cursor advance: for each shard of the batch ($2) it
// moves pos to the last seq published ($3) or, when the window is exhausted ($5),
// closes it (lo = the hi it was read against ($4), pos NULL), renews the lease, and
// writes the batch's log row, all only where owner token $1 still holds the shard.
// It returns how many shards it advanced: fewer than sent means those leases are lost.
const gateAdvanceSQL = `WITH u AS (
    SELECT * FROM unnest($2::smallint[], $3::bigint[], $4::bigint[], $5::bool[]) AS u(shard, last_seq, hi_tick, done)
), adv AS (
    UPDATE outbox_v2_shard s
    SET lo_tick = CASE WHEN u.done THEN u.hi_tick ELSE s.lo_tick END,
        hi_tick = CASE WHEN u.done THEN NULL ELSE u.hi_tick END,
        pos = CASE WHEN u.done THEN NULL ELSE u.last_seq END,
        lease_until = now() + $6::interval
    FROM u
    WHERE s.shard = u.shard AND s.owner = $1
    RETURNING s.shard
)
INSERT INTO outbox_v2_batch (owner, shards, last_seq, hi_tick, partitions, offsets)
SELECT $1, array_agg(adv.shard), $3, $4, $7, $8 FROM adv HAVING count(*) > 0
RETURNING cardinality(shards)`

// gateLeaseSQL gives worker k of n its shards (shard % n = k) under a fresh token.
const gateLeaseSQL = `UPDATE outbox_v2_shard SET owner = $1, lease_until = now() + interval '30 seconds'
WHERE shard % $3 = $2`

// gateShardsSQL creates the shard rows, every window starting at tick $1.
var gateShardsSQL = `INSERT INTO outbox_v2_shard (shard, lo_tick) SELECT g, $1 FROM generate_series(0, ` +
	strconv.Itoa(gateShards-1) + `) g`

// gateInsertSQL is a producer's plain single-row INSERT, the same columns as v1's (relayCols).
const gateInsertSQL = `INSERT INTO outbox_v2 (` + relayCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
