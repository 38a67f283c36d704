package outboxstats

// The status of a table of contract v2 (docs/contract-v2.md): the outbox rows are
// never updated, so nothing on a row says whether it was published. Every field is
// derived from the side tables instead:
//
//   - Pending: the rows in each shard's open windows, counted with the relay's own
//     window predicate, plus the HELD hold rows (newer versions waiting behind a
//     retry: v1 counted those as PENDING). A shard has one open window (lo_tick, now]
//     at a window boundary, and two while its window is read in parts: the rest of
//     (lo_tick, hi_tick] after pos, and (hi_tick, now]. "now" is this read's own
//     snapshot, not the newest tick: the relay ticks only when it has caught up, so a
//     stopped relay would otherwise show nothing pending. A row counts once its
//     transaction committed, whatever its txid and however long another transaction
//     runs; an uncommitted one never counts.
//   - The count is exact up to PendingCountBudget rows (split evenly over the shards);
//     a shard with more has the rest of its seq range extrapolated from the density
//     of the rows counted (Stats.PendingEstimated).
//   - OldestPending: the oldest created_at among the counted window rows and the open
//     (RETRY, HELD) hold rows: how long the oldest unpublished event has waited, as v1.
//   - Retrying, Dead: the RETRY and DEAD hold rows.
//   - Sending: shards under a live lease with something to publish (rows in their
//     window, or a window read in parts): v2 has no rows in flight, the unit of work
//     is a shard's window.
//   - ExpiredLeases: shards whose owner's lease ended without the shard being
//     released (a worker that died or stalled; another takes it over within lease/3).
//   - LastPublish: the newest batch log row that published at least one event. A hold
//     row sent on retry is deleted, not logged, so it does not move it.

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// PendingCountBudget bounds the outbox rows one status read of a v2 table visits to
// count Pending exactly: each shard's windows are counted up to
// max(PendingCountBudget/shards, minShardCount) rows per part, and a shard with more
// is extrapolated. Why 16,384: counting a row is an index entry and a heap visit, a
// few microseconds, and every relay worker runs this read each StatsInterval besides
// the operator: at 65,536 the read of a 100k backlog took 43 ms quiet and 160-225 ms
// during a drain, a quarter of PostgreSQL's CPU in the bench's 100k drain; at 16,384,
// 12 ms, and the estimate stays within about 1% (docs/contract-v2.md, "Status").
const PendingCountBudget = 16384

// minShardCount is the least a shard is counted exactly, whatever its shard count.
const minShardCount = 16

// shardCountCap is the per-shard, per-part cap for a table of n shards.
func shardCountCap(n int) int {
	return max(PendingCountBudget/max(n, 1), minShardCount)
}

// v2Settings, for the rest of Read's transaction: the window counts stay on the
// (shard, seq) and (shard, txid) indexes, as the relay's read does
// (schema.WindowPlanner).
var v2Settings = schema.SetLocal(schema.WindowPlanner)

// readV2 fills s from t's side tables (c is its contract) inside Read's transaction.
func readV2(ctx context.Context, tx *sql.Tx, t pgident.Table, c schema.Contract, s *Stats) error {
	if _, err := tx.ExecContext(ctx, v2Settings); err != nil {
		return err
	}
	var oldestWin, oldestHold, last sql.NullTime
	var pending, held int64
	err := tx.QueryRowContext(ctx, v2WindowsSQL(t), shardCountCap(c.Shards)).
		Scan(&pending, &oldestWin, &s.Sending, &s.ExpiredLeases, &s.PendingEstimated)
	if err != nil {
		return fmt.Errorf("count the open windows of %s: %w", t, err)
	}
	if err := tx.QueryRowContext(ctx, v2HoldSQL(t)).Scan(&s.Retrying, &held, &s.Dead, &oldestHold); err != nil {
		return fmt.Errorf("count the hold rows of %s: %w", t, err)
	}
	if err := tx.QueryRowContext(ctx, v2LastPublishSQL(t)).Scan(&last); err != nil {
		return fmt.Errorf("read the batch log of %s: %w", t, err)
	}
	s.Pending = pending + held
	for _, o := range []sql.NullTime{oldestWin, oldestHold} {
		if o.Valid && (s.OldestPending.IsZero() || o.Time.Before(s.OldestPending)) {
			s.OldestPending = o.Time
		}
	}
	if last.Valid {
		s.LastPublish = last.Time
	}
	return nil
}

// v2WindowsSQL counts the rows of every shard's open windows ($1 the per-shard cap)
// and the shards being worked on or abandoned. Per shard:
//   - part 0 and 1 are the relay's read of the window (lo, hi] after pos (shardstore
//     readSQL): hi is hi_tick while the window is read in parts, else this read's
//     snapshot; part 0 the rows of the transactions running at lo that ended by hi,
//     part 1 one range scan of (shard, seq);
//   - part 2 and 3 are the window (hi_tick, now] of a shard read in parts, the same
//     way.
//
// Part 0 and 2 probe (shard, txid) once per id of the tick's xip list that ended
// (usually none: then no index is touched), as the relay's read does. Not
// "txid = ANY (ids)": with it the planner chose by cost between (shard, txid = ANY)
// and the shard alone with the array as a filter, which walked each shard's whole
// history on every status read (docs/contract-v2.md, "As built: the status read's
// probes"). OFFSET 0 keeps the probe a nested loop; "o.seq + 0" keeps it off
// (shard, seq).
//
// A part that reached the cap is extrapolated over the rest of its seq range (to
// hi_tick's seq_after, or the sequence's last value) at the density of the rows it
// counted.
func v2WindowsSQL(t pgident.Table) string {
	tick := t.WithSuffix(schema.TickSuffix).Qualified()
	q := t.Qualified()
	part := func(n, where, order string) string {
		return `(SELECT ` + n + ` AS part, o.seq, o.created_at FROM ` + q + ` o
             WHERE ` + where + order + ` LIMIT $1)`
	}
	// ended is a part of the rows (where) of the transactions of snap's xip list
	// visible in upTo; a NULL snap (fx_snap of a shard not read in parts) lists none.
	ended := func(n, snap, upTo, where string) string {
		return `(SELECT ` + n + ` AS part, p.seq, p.created_at
             FROM pg_snapshot_xip(` + snap + `) AS en(id)
             CROSS JOIN LATERAL (SELECT o.seq, o.created_at FROM ` + q + ` o
                 WHERE o.shard = w.shard AND o.txid = en.id AND ` + where + `
                 OFFSET 0) p
             WHERE pg_visible_in_snapshot(en.id, ` + upTo + `) LIMIT $1)`
	}
	return `WITH nw AS (
    SELECT pg_current_snapshot() AS snap,
           COALESCE(pg_sequence_last_value(` + pgident.QuoteLiteral(t.WithSuffix(schema.SeqSuffix).Qualified()) + `), 0) AS last_seq
),
w AS (
    SELECT s.shard, s.owner, s.lease_until, s.pos, nw.snap AS now_snap, nw.last_seq,
           lo.snap AS lo_snap, lo.seq_before AS lo_seq,
           COALESCE(fx.snap, nw.snap) AS hi_snap, COALESCE(fx.seq_after, nw.last_seq) AS hi_seq,
           fx.snap AS fx_snap, fx.seq_before AS fx_seq
    FROM ` + t.WithSuffix(schema.ShardSuffix).Qualified() + ` s
    JOIN ` + tick + ` lo ON lo.tick = s.lo_tick
    LEFT JOIN ` + tick + ` fx ON fx.tick = s.hi_tick
    CROSS JOIN nw
),
c AS (
    SELECT w.shard, w.owner, w.lease_until, w.pos, r.n, r.oldest,
           CASE WHEN r.n1 >= $1 AND r.max1 > r.min1 THEN floor((w.hi_seq - r.max1) * (r.n1 - 1)::numeric / (r.max1 - r.min1)) ELSE 0 END
         + CASE WHEN r.n3 >= $1 AND r.max3 > r.min3 THEN floor((w.last_seq - r.max3) * (r.n3 - 1)::numeric / (r.max3 - r.min3)) ELSE 0 END AS extra,
           r.n0 >= $1 OR r.n1 >= $1 OR r.n2 >= $1 OR r.n3 >= $1 AS capped
    FROM w CROSS JOIN LATERAL (
        SELECT count(*) AS n, min(e.created_at) AS oldest,
               count(*) FILTER (WHERE e.part = 0) AS n0, count(*) FILTER (WHERE e.part = 2) AS n2,
               count(*) FILTER (WHERE e.part = 1) AS n1, min(e.seq) FILTER (WHERE e.part = 1) AS min1, max(e.seq) FILTER (WHERE e.part = 1) AS max1,
               count(*) FILTER (WHERE e.part = 3) AS n3, min(e.seq) FILTER (WHERE e.part = 3) AS min3, max(e.seq) FILTER (WHERE e.part = 3) AS max3
        FROM (
            ` + ended("0", "w.lo_snap", "w.hi_snap", `o.seq + 0 > COALESCE(w.pos, 0) AND o.seq + 0 <= w.lo_seq`) + `
            UNION ALL
            ` + part("1", `o.shard = w.shard AND o.seq > GREATEST(w.pos, w.lo_seq) AND o.seq <= w.hi_seq
               AND pg_visible_in_snapshot(o.txid, w.hi_snap) AND NOT pg_visible_in_snapshot(o.txid, w.lo_snap)`, `
             ORDER BY o.seq`) + `
            UNION ALL
            ` + ended("2", "w.fx_snap", "w.now_snap", `o.seq + 0 <= w.fx_seq`) + `
            UNION ALL
            ` + part("3", `w.fx_snap IS NOT NULL AND o.shard = w.shard AND o.seq > w.fx_seq AND o.seq <= w.last_seq
               AND pg_visible_in_snapshot(o.txid, w.now_snap) AND NOT pg_visible_in_snapshot(o.txid, w.fx_snap)`, `
             ORDER BY o.seq`) + `
        ) e
    ) r
)
SELECT COALESCE(sum(n + extra), 0)::bigint,
       min(oldest),
       count(*) FILTER (WHERE owner IS NOT NULL AND lease_until >= now() AND (n > 0 OR pos IS NOT NULL)),
       count(*) FILTER (WHERE owner IS NOT NULL AND lease_until < now()),
       COALESCE(bool_or(capped), false)
FROM c`
}

// v2HoldSQL counts the hold rows by state and finds the oldest open one. The hold
// table holds only failed events and the versions behind them.
func v2HoldSQL(t pgident.Table) string {
	return `SELECT count(*) FILTER (WHERE state = '` + schema.StatusRetry + `'),
       count(*) FILTER (WHERE state = '` + schema.StatusHeld + `'),
       count(*) FILTER (WHERE state = '` + schema.StatusDead + `'),
       min(created_at) FILTER (WHERE state IN ('` + schema.StatusRetry + `', '` + schema.StatusHeld + `'))
FROM ` + t.WithSuffix(schema.HoldSuffix).Qualified()
}

// v2LastPublishSQL is the time of the newest batch log row that published an event:
// a backward walk of the batch log's primary key that stops at the first one (an
// advance whose events all went to the hold table logs empty arrays).
func v2LastPublishSQL(t pgident.Table) string {
	return `SELECT (SELECT at FROM ` + t.WithSuffix(schema.BatchSuffix).Qualified() + `
        WHERE cardinality(offsets) > 0 ORDER BY batch DESC LIMIT 1)`
}
