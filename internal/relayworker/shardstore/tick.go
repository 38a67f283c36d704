// tick.go: the tick, the clock of every shard's windows. A tick records, under the
// table's tick lock (so tick numbers ascend with their snapshots), the sequence's
// last value read before a snapshot, the snapshot, and the last value read after it.

package shardstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// IdleTicks is how many ticks an empty window may lag behind the newest one before
// Tick closes it. Only a window with events is closed by its owner's advance, so
// without this an idle shard would keep its lo_tick, and every tick after it, for
// ever; closing after a few ticks bounds the tick table and costs one cursor log row
// per idle shard per housekeeping round.
const IdleTicks = 16

// HousekeepEvery is the least time between two of a worker's housekeeping rounds
// (the idle close and the tick trim). Counted in ticks alone, a busy table ran them
// dozens of times a second (a caught-up worker ticks after every short batch: 43
// rounds/s at 1,000 events/s), and each round's idle close wrote a new version of
// every idle shard's row (then updated in place; now a cursor log row): ~3,000 a
// second, none of which can be pruned while a transaction elsewhere in the cluster
// stays open. Once a second, a worker writes at most one cursor row per shard it
// holds per second, and an idle window lags at most about a second's ticks; the tick
// table keeps as many (1,000-2,000 small rows at 1,000-5,000 events/s).
// docs/contract-v2.md, "The open write transaction over ten minutes" and "The cursor
// log, as built".
const HousekeepEvery = time.Second

// Tick records a tick if one is needed and reports its number and whether it
// recorded one. A tick is needed when the sequence moved past the newest tick's
// seq_before (a transaction that took its id after that tick's snapshot drew a
// larger number; comparing with seq_after would miss one that drew it between the
// snapshot and seq_after), or when a transaction that was running at the newest tick
// has ended since (its rows become a window). So an idle table, even with a long
// transaction open elsewhere, gets no ticks. Several workers may call it; the lock
// serialises them.
//
// Then, once the newest tick is IdleTicks past this worker's last housekeeping
// (whoever recorded the ticks in between), it closes the windows of its own shards
// (held under tokens) that stayed empty for IdleTicks ticks and deletes the ticks
// below every shard's lo_tick. Own shards only: the owner's advance is the only other
// writer of those rows, and the two run one after the other in the owner's loop;
// closing every worker's idle shards made the other workers' advances wait for this
// statement (13-30 ms, dozens of times a minute at 5,000 events/s). Counted from the
// newest tick, not from the ticks this worker records: a worker whose shards are all
// idle records few ticks or none (a busy one records them first), and its windows
// would hold every tick since.
func (s *Store) Tick(ctx context.Context, tokens []string) (tick int64, recorded bool, err error) {
	tick, newest, recorded, err := s.tick(ctx)
	if err != nil {
		return 0, false, err
	}
	now := time.Since(s.started)
	last, lastAt := s.housekept.Load(), time.Duration(s.housekeptAt.Load())
	if housekeepingDue(newest, last, now-lastAt, s.housekeepEvery) && s.housekept.CompareAndSwap(last, newest) {
		s.housekeptAt.Store(int64(now))
		// After the tick's commit, outside the tick lock: in the bench the idle close
		// took 47-257 ms per call under load, and the other worker's tick waited for it.
		if err := s.inReadPlannerTx(ctx, "tick: close idle windows", func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, closeIdleSQL(s.t), newest-IdleTicks, pq.Array(tokens))
			return err
		}); err != nil {
			return tick, recorded, err
		}
		s.startTrim(ctx, tokens)
	}
	if err := s.trimFailed.Swap(nil); err != nil {
		return tick, recorded, *err
	}
	return tick, recorded, nil
}

// startTrim deletes the ticks no window needs and the cursor log rows below each of
// the worker's shards' newest, beside the relay loop (one round at a time: a round
// still running when the next is due is not doubled); a failure is returned by the
// next Tick. Both are safe beside the worker's own statements: the trims delete only
// what a cursor has passed (lo_tick only grows, a shard's newest row is never
// deleted). Not in the loop: deleting the cursor rows of a second at 5,000 events/s
// (thousands) took 4-5 ms, a stall of every worker's loop once a second, which the
// p99 of 1 % of events saw (the bench's p99 at 5,000 events/s: 30.6-43.7 ms for the
// build before the cursor log, 67.2 with the trims in the loop). The idle close stays
// in the loop: it reads the cursor its insert replaces, so it must not overlap the
// worker's advance.
func (s *Store) startTrim(ctx context.Context, tokens []string) {
	if !s.trimming.CompareAndSwap(false, true) {
		return
	}
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		defer s.trimming.Store(false)
		if err := s.trims.round(ctx, s, tokens); err != nil {
			s.trimFailed.Store(&err)
		}
	}()
}

// tick is Tick's transaction: it records a tick when needed and returns it, and
// the newest tick either way.
func (s *Store) tick(ctx context.Context) (tick, newest int64, recorded bool, err error) {
	lock, err := s.prepared(ctx, tickLockSQL(s.t))
	if err != nil {
		return 0, 0, false, fmt.Errorf("tick: lock: %w", err)
	}
	record, err := s.prepared(ctx, tickSQL(s.t))
	if err != nil {
		return 0, 0, false, fmt.Errorf("tick: record: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, false, fmt.Errorf("tick: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	var before int64
	var needed bool
	if err := tx.StmtContext(ctx, lock).QueryRowContext(ctx, "outbox-tick:"+s.t.String()).Scan(&before, &needed, &newest); err != nil {
		return 0, 0, false, fmt.Errorf("tick: lock: %w", err)
	}
	if !needed {
		// Checked before the INSERT: the tick's snapshot takes a transaction id
		// (schema.TickSnapshot), and an idle worker asks several times a second.
		return 0, newest, false, nil
	}
	err = tx.StmtContext(ctx, record).QueryRowContext(ctx, before).Scan(&tick)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, newest, false, nil // not needed; the rollback ends the transaction
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("tick: record: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, false, fmt.Errorf("tick: commit: %w", err)
	}
	return tick, tick, true, nil
}

// housekeepingDue says whether a worker whose last housekeeping was at tick last,
// since ago, runs it now that newest is the newest tick: every IdleTicks ticks, and
// no sooner than every after it. A caught-up worker ticks after every short batch,
// and the two statements were a third of a tick's time under the tick lock; run this
// often, a window empty for IdleTicks ticks is closed within as many more ticks or
// every, and the tick table keeps about 2 x IdleTicks ticks, or every's ticks, beyond
// the oldest busy window.
func housekeepingDue(newest, last int64, since, every time.Duration) bool {
	return newest-last >= IdleTicks && since >= every
}

// seqName is the sequence as an SQL literal for pg_sequence_last_value.
func seqName(t pgident.Table) string {
	return pgident.QuoteLiteral(t.WithSuffix(schema.SeqSuffix).Qualified())
}

// tickLockSQL takes the tick lock ($1 its key) and reads seq_before: before the
// snapshot of the next statement (READ COMMITTED: each statement takes its own). It
// also says whether a tick looks needed (tickSQL's condition, against the newest
// tick this statement sees), so an idle worker's Tick ends here without a transaction
// id, and returns that newest tick's number (for the housekeeping's schedule).
//
// The tick commits asynchronously (synchronous_commit off for its transaction): the
// tick lock is not held through a WAL flush, and a caught-up turn waits for one flush
// (its advance's), not two. An asynchronous tick is visible before it is durable, so a
// PostgreSQL crash can lose a tick that a worker, which survives the crash, has read a
// window up to; after the restart a new tick takes the lost one's number with a later
// snapshot. The advance therefore names the tick by number and TickStamp and moves no
// cursor when the tick of that number is another one (Advanced.Stale: read again). A
// cursor that names a tick was written by a synchronous commit that saw the tick
// committed, so its WAL flush made the tick durable too.
func tickLockSQL(t pgident.Table) string {
	return `SELECT s.v, s.v > nw.seq_before
       OR EXISTS (SELECT FROM pg_snapshot_xip(nw.snap) x WHERE pg_visible_in_snapshot(x, pg_current_snapshot())),
       nw.tick
FROM (SELECT COALESCE(pg_sequence_last_value(` + seqName(t) + `), 0) AS v
      FROM pg_advisory_xact_lock(hashtext($1)), set_config('synchronous_commit', 'off', true)) s,
     (SELECT tick, seq_before, snap FROM ` + side(t, schema.TickSuffix) + ` ORDER BY tick DESC LIMIT 1) nw`
}

// TickStamp is the SQL of a tick's identity, from its at column (expr; the
// recording transaction's start, in microseconds): a tick that took a lost tick's
// number after a PostgreSQL crash started after the restart, so its stamp differs
// (unless the server's clock went back across the restart to the very microsecond).
// The read returns it with hi_tick and the advance checks it.
func TickStamp(expr string) string {
	return `(extract(epoch FROM ` + expr + `) * 1000000)::bigint`
}

// tickSQL records the tick ($1 seq_before) when it is needed (see Tick).
func tickSQL(t pgident.Table) string {
	tick := side(t, schema.TickSuffix)
	return `INSERT INTO ` + tick + ` (tick, snap, snap_xmax, seq_before, seq_after)
SELECT nw.tick + 1, ts.snap, pg_snapshot_xmax(ts.snap),
       $1, COALESCE(pg_sequence_last_value(` + seqName(t) + `), 0)
FROM (SELECT tick, snap, seq_before FROM ` + tick + ` ORDER BY tick DESC LIMIT 1) nw
CROSS JOIN LATERAL (SELECT ` + schema.TickSnapshot + ` AS snap) ts
WHERE $1 > nw.seq_before
   OR EXISTS (SELECT FROM pg_snapshot_xip(nw.snap) x WHERE pg_visible_in_snapshot(x, pg_current_snapshot()))
RETURNING tick`
}

// closeIdleSQL and trimTicksSQL run after the tick's commit, each a statement of its
// own with an asynchronous commit: neither needs the tick lock (the idle close checks
// emptiness up to the newest tick its own snapshot sees, whatever ticks come after,
// and lo_tick only grows, so the trim's minimum is never too high), and losing one in
// a crash only leaves a window or a tick for the next round. An advance that names a
// tick the idle close moved a lo_tick to commits synchronously after it, as ever.
//
// closeIdleSQL moves the cursor's lo_tick up to the newest tick for the shards held
// under the tokens $2 whose window (lo, newest] has no event and whose lo_tick is
// below $1; only at a window boundary (pos NULL). Emptiness is checked over the whole new range, so no event can be
// skipped whoever owns the shard and whatever it is doing: a window with events is
// left to its owner. The rows of transactions of lo's xip list that ended by the
// newest tick are found by one probe of (shard, txid) per such id, as in the read
// (readSQL says why not "txid = ANY"; OFFSET 0 keeps the EXISTS a per-id probe):
// the anti join with ANY filtered the shard's whole history and evaluated the id
// list once per row (194 ms for 256 shards of 80 rows each). The range part is a
// per-shard probe of (shard, seq) for the same reason (OFFSET 0 again): once the
// table's statistics counted a few thousand rows, the planner turned it into a hash
// anti join over a sequential scan of the whole outbox table, a cost that grew with
// the table (37 ms per call at 115,000 rows, 0.7 of a core at 5,000 events/s: the
// bench's p99 rose from 45 to 150 ms within one run).
//
// It closes a window by inserting the shard's next cursor, under the lease row's lock
// with one of the worker's tokens in it (rechecked on the row's newest version, so a
// shard taken over meanwhile is left alone); the only other writer of the shard's
// cursor is the same worker's advance, which runs in the same loop, one after the
// other. It never waits for a lease row (SKIP LOCKED): a row locked by an advance is
// not idle anyway. Waiting, taking its rows in another order than an advance that
// locks several, it deadlocked with it: PostgreSQL found the cycle only after
// deadlock_timeout (1 s by default) and aborted one of the two, and every worker
// stood still for that second (the bench's p99 of 1.0-1.5 s at 1,000 and 5,000
// events/s, when both updated the shard rows in place).
func closeIdleSQL(t pgident.Table) string {
	tick := side(t, schema.TickSuffix)
	return `WITH nw AS (SELECT tick, snap, seq_after FROM ` + tick + ` ORDER BY tick DESC LIMIT 1),
durability AS (SELECT set_config('synchronous_commit', 'off', true) AS v),
idle AS (
  SELECT l.shard, nw.tick FROM ` + side(t, schema.LeaseSuffix) + ` l
  CROSS JOIN LATERAL ` + schema.NewestCursor(t, "l.shard", "c.lo_tick, c.hi_tick, c.pos") + ` c
  JOIN ` + tick + ` lo ON lo.tick = c.lo_tick
  CROSS JOIN nw CROSS JOIN durability
  WHERE c.lo_tick < $1 AND l.owner = ANY ($2::text[]) AND c.pos IS NULL AND c.hi_tick IS NULL
    AND NOT EXISTS (SELECT FROM pg_snapshot_xip(lo.snap) AS en(id)
                    WHERE pg_visible_in_snapshot(en.id, nw.snap)
                      AND EXISTS (SELECT FROM ` + t.Qualified() + ` o
                                  WHERE o.shard = l.shard AND o.txid = en.id AND o.seq + 0 <= lo.seq_before OFFSET 0))
    AND NOT EXISTS (SELECT FROM ` + t.Qualified() + ` o
                    WHERE o.shard = l.shard AND o.seq > lo.seq_before AND o.seq <= nw.seq_after
                      AND pg_visible_in_snapshot(o.txid, nw.snap) AND NOT pg_visible_in_snapshot(o.txid, lo.snap) OFFSET 0)
  ORDER BY l.shard
  FOR NO KEY UPDATE OF l SKIP LOCKED
)
INSERT INTO ` + side(t, schema.CursorSuffix) + ` (shard, lo_tick)
SELECT shard, tick FROM idle ORDER BY shard`
}

// trimFloors is where the last trims stopped. Both logs grow at one end only (tick
// numbers and a shard's cursor ids ascend in commit order: their writers hold the
// tick lock or the lease row's lock when they draw one), so everything below where a
// trim stopped was deleted by it, and the next trim deletes from there on. From the
// first row instead, each trim walked every row deleted before, and while a
// transaction elsewhere in the cluster stays open none of them can be pruned: after
// ten minutes at 1,000 events/s the tick trim walked ~150,000 dead ticks per round
// (8.6 ms per call on average over the bench's ten-minute run).
//
// Every FullTrimEvery-th round starts from the first row again: the trims commit
// asynchronously, and one lost in a PostgreSQL crash leaves rows below where this
// process thinks it stopped; the full round deletes them.
type trimFloors struct {
	rounds  int
	tick    int64           // the least tick the last tick trim kept
	cursors map[int16]int64 // per shard, the newest cursor id the last trim kept
}

// FullTrimEvery is how many trim rounds there are between two that start from each
// log's first row (about a minute at HousekeepEvery).
const FullTrimEvery = 64

// round deletes the ticks below every shard's lo_tick, then the cursor log rows of
// the shards held under tokens below each one's newest.
func (f *trimFloors) round(ctx context.Context, s *Store, tokens []string) error {
	if f.rounds%FullTrimEvery == 0 {
		f.tick, f.cursors = 0, nil
	}
	f.rounds++
	var lo sql.NullInt64
	if err := s.inReadPlannerTx(ctx, "tick: trim", func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, leastLoTickSQL(s.t)).Scan(&lo); err != nil || !lo.Valid {
			return err
		}
		_, err := tx.ExecContext(ctx, trimTicksSQL(s.t), f.tick, lo.Int64)
		return err
	}); err != nil {
		return err
	}
	if lo.Valid {
		f.tick = lo.Int64
	}
	return s.inReadPlannerTx(ctx, "tick: trim the cursor log", func(tx *sql.Tx) error {
		return f.trimCursors(ctx, tx, s, tokens)
	})
}

// leastLoTickSQL is the least lo_tick of any shard (the shard view's: each shard's
// newest cursor); NULL with no shard rows. lo_tick only grows, so the ticks below it
// stay unneeded after the statement.
func leastLoTickSQL(t pgident.Table) string {
	return `SELECT min(lo_tick) FROM ` + side(t, schema.ShardSuffix)
}

// trimTicksSQL deletes the ticks in [$1, $2): from where the last trim stopped to the
// least lo_tick. The least lo_tick is read by a statement of its own so that both
// bounds are values and the plan is a range scan of the primary key over what is
// deleted: as one statement with it from a CTE, the plan bounded the scan by the
// lower one only and filtered the upper.
func trimTicksSQL(t pgident.Table) string {
	return `DELETE FROM ` + side(t, schema.TickSuffix) + ` WHERE tick >= $1 AND tick < $2
  AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL`
}

// trimCursors deletes the cursor log rows of the shards held under tokens that are
// older than each shard's newest (its cursor), from where the last trim stopped.
func (f *trimFloors) trimCursors(ctx context.Context, tx *sql.Tx, s *Store, tokens []string) error {
	shards, floors := make([]int64, 0, len(f.cursors)), make([]int64, 0, len(f.cursors))
	for sh, id := range f.cursors {
		shards, floors = append(shards, int64(sh)), append(floors, id)
	}
	rows, err := tx.QueryContext(ctx, trimCursorsSQL(s.t), pq.Array(tokens), pq.Array(shards), pq.Array(floors))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var sh int16
		var newest int64
		if err := rows.Scan(&sh, &newest); err != nil {
			return err
		}
		if f.cursors == nil {
			f.cursors = map[int16]int64{}
		}
		f.cursors[sh] = newest
	}
	return rows.Err()
}

// trimCursorsSQL: $1 the tokens, $2 shards and $3 the newest id the last trim kept
// for each (parallel; a shard not in them starts from 0). It returns each held
// shard's newest id. Committed asynchronously, as the tick trim: a trim lost in a
// crash leaves rows for the next full round.
func trimCursorsSQL(t pgident.Table) string {
	cursor := side(t, schema.CursorSuffix)
	return `WITH n AS (
    SELECT l.shard, COALESCE(f.floor, 0) AS floor, ` + schema.NewestCursor(t, "l.shard", "c.id") + ` AS newest
    FROM ` + side(t, schema.LeaseSuffix) + ` l
    LEFT JOIN unnest($2::smallint[], $3::bigint[]) AS f(shard, floor) ON f.shard = l.shard
    WHERE l.owner = ANY ($1::text[])
), gone AS (
    DELETE FROM ` + cursor + ` c USING n
    WHERE c.shard = n.shard AND c.id >= n.floor AND c.id < n.newest
      AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
)
SELECT shard, newest FROM n WHERE newest IS NOT NULL`
}
