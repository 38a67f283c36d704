// v2.go: retention of a v2 table (docs/contract-v2.md, "As built: operator and
// retention"). The relay never deletes outbox rows; this job does, in bounded chunks,
// and only rows every cursor has passed. DEAD hold rows follow v1's dead retention;
// RETRY and HELD hold rows are never touched. The batch log is trimmed by age.

package archive

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// v2Columns are the outbox columns a v2 archive row copies.
var v2Columns = append(append([]string{}, schema.Columns[:10]...), "created_at", "txid", "seq", "shard")

// runV2 is run for a v2 table. On an error res holds what was already moved.
func runV2(ctx context.Context, db *sql.DB, o Options) (Result, error) {
	var res Result
	if _, err := schema.VerifyV2(ctx, db, o.Table, 0); err != nil {
		return res, err
	}
	if err := checkV2Archive(ctx, db, o); err != nil {
		return res, err
	}
	var err error
	if res.SentMoved, err = drainShards(ctx, func(from int) (int64, int, error) {
		return movePassedBatch(ctx, db, o, from)
	}); err != nil {
		return res, fmt.Errorf("archive passed outbox rows: %w", err)
	}
	if res.DeadMoved, err = drain(ctx, func() (int64, error) {
		return execCount(ctx, db, moveDeadHoldSQL(o.Table, o.Mode), o.DeadRetention.Seconds(), o.BatchSize)
	}); err != nil {
		return res, fmt.Errorf("archive DEAD hold rows: %w", err)
	}
	// The batch log is kept as long as the events it traces (sentRetention).
	if res.BatchLogTrims, err = drain(ctx, func() (int64, error) {
		return execCount(ctx, db, trimBatchLogSQL(o.Table), o.SentRetention.Seconds(), o.BatchSize)
	}); err != nil {
		return res, fmt.Errorf("trim batch log: %w", err)
	}
	res.ConsumerLogTrims, err = trimConsumerLogs(ctx, db, o)
	return res, err
}

// checkV2Archive refuses archive mode with one line when <table>_archive is missing
// or is not a v2 archive (a v2 table made before its migrate created the archive, or
// a v1 archive left under the name): the first chunk would fail on it otherwise.
func checkV2Archive(ctx context.Context, db *sql.DB, o Options) error {
	if o.Mode == "delete" {
		return nil
	}
	ok, err := schema.HasV2Archive(ctx, db, o.Table)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("archive mode needs %s with the v2 columns: run `relayworker migrate --contract v2` (it creates it), or use --mode delete",
			o.Table.WithSuffix(schema.ArchiveSuffix))
	}
	return nil
}

// drainShards repeats chunk, each starting at the highest shard the previous one
// removed rows of (shards below it have none left to remove in this run), until a
// chunk removes nothing.
func drainShards(ctx context.Context, chunk func(from int) (int64, int, error)) (int64, error) {
	var total int64
	from := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, last, err := chunk(from)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
		from = last
	}
}

// movePassedBatch removes up to BatchSize passed outbox rows older than the sent
// retention from shards >= from (archive mode: copied first) and returns how many
// and the highest shard it removed rows of.
func movePassedBatch(ctx context.Context, db *sql.DB, o Options, from int) (int64, int, error) {
	var n int64
	var last sql.NullInt64
	if err := db.QueryRowContext(ctx, movePassedSQL(o.Table, o.Mode), o.SentRetention.Seconds(), o.BatchSize, from).
		Scan(&n, &last); err != nil {
		return 0, 0, err
	}
	return n, int(last.Int64), nil
}

func execCount(ctx context.Context, db *sql.DB, query string, args ...any) (int64, error) {
	r, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

// passedVictimsSQL selects the outbox rows one chunk removes: $1 retention in
// seconds, $2 batch size, $3 the first shard. Per shard only the first BatchSize rows
// in seq order are looked at, and only the run of them that is old and passed from
// the first on (bool_and over seq order): a chunk reads a bounded range of (shard,
// seq), and a row not yet passed (or still young) holds back the rows after it until
// a later run, never deleting anything early. A shard whose first row does not
// qualify costs one probe (the one-time filter), not BatchSize rows.
func passedVictimsSQL(tbl pgident.Table) string {
	t := tbl.Qualified()
	tick := tbl.WithSuffix(schema.TickSuffix).Qualified()
	return `SELECT p.event_id
    FROM (SELECT s.shard, s.pos, lo.snap AS lo_snap, hi.snap AS hi_snap
          FROM ` + tbl.WithSuffix(schema.ShardSuffix).Qualified() + ` s
          JOIN ` + tick + ` lo ON lo.tick = s.lo_tick
          LEFT JOIN ` + tick + ` hi ON hi.tick = s.hi_tick
          WHERE s.shard >= $3
          ORDER BY s.shard) c
    CROSS JOIN LATERAL (
        SELECT r.event_id, bool_and(r.ok) OVER (ORDER BY r.seq) AS prefix_ok
        FROM (SELECT o.event_id, o.seq, ` + passedExpr("o") + ` AS ok
              FROM ` + t + ` o
              WHERE o.shard = c.shard
                AND (SELECT ` + passedExpr("f") + ` FROM ` + t + ` f WHERE f.shard = c.shard ORDER BY f.seq LIMIT 1)
              ORDER BY o.seq LIMIT $2) r) p
    WHERE p.prefix_ok
    LIMIT $2`
}

// passedExpr: row r is old enough ($1) and its shard's cursor (c) is beyond it. Its
// transaction is visible in the snapshot of the shard's lo_tick (every window up to
// lo_tick was read and advanced), or the shard's window is read in parts (pos set)
// and r is in the part already read: visible in hi_tick's snapshot with seq <= pos
// (the window is read in seq order; a row with seq <= pos that was still running at
// hi belongs to a later window and is not passed). IS TRUE: NULL (no hi tick, no
// pos) is not passed, and bool_and would skip a NULL.
func passedExpr(r string) string {
	return `(` + r + `.created_at < now() - make_interval(secs => $1)
                      AND (pg_visible_in_snapshot(` + r + `.txid, c.lo_snap)
                           OR (` + r + `.seq <= c.pos AND pg_visible_in_snapshot(` + r + `.txid, c.hi_snap)))) IS TRUE`
}

// movePassedSQL is movePassedBatch's statement for mode ("archive" or "delete"); it
// returns the rows removed and the highest shard among them.
func movePassedSQL(tbl pgident.Table, mode string) string {
	t := tbl.Qualified()
	// = ANY (ARRAY(...)): primary key probes. A join with v was planned as a hash join
	// over a sequential scan of the whole outbox table, in every chunk.
	moved := `moved AS (DELETE FROM ` + t + ` o WHERE o.event_id = ANY (ARRAY(SELECT event_id FROM v)) RETURNING o.*)`
	if mode == "delete" {
		return `WITH v AS (` + passedVictimsSQL(tbl) + `),
` + moved + `
SELECT count(*), max(shard) FROM moved`
	}
	cols := strings.Join(v2Columns, ", ")
	return `WITH v AS (` + passedVictimsSQL(tbl) + `),
` + moved + `,
archived AS (INSERT INTO ` + tbl.WithSuffix(schema.ArchiveSuffix).Qualified() + ` (` + cols + `, state)
    SELECT ` + cols + `, '` + schema.ArchivePassed + `' FROM moved)
SELECT count(*), max(shard) FROM moved`
}

// moveDeadHoldSQL removes DEAD hold rows past the dead retention (from updated_at:
// when they went DEAD, as v1's DEAD rows), copying them first in archive mode: $1
// retention in seconds, $2 batch size. SKIP LOCKED and the state re-check keep it
// out of a replay's way (replay turns DEAD back into RETRY).
func moveDeadHoldSQL(tbl pgident.Table, mode string) string {
	hold := tbl.WithSuffix(schema.HoldSuffix).Qualified()
	victims := `SELECT event_id FROM ` + hold + ` WHERE state = '` + schema.StatusDead +
		`' AND updated_at < now() - make_interval(secs => $1) ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED`
	del := `DELETE FROM ` + hold + ` h USING v WHERE h.event_id = v.event_id AND h.state = '` + schema.StatusDead + `'`
	if mode == "delete" {
		return `WITH v AS (` + victims + `)
` + del
	}
	cols := strings.Join(v2Columns, ", ")
	return `WITH v AS (` + victims + `),
moved AS (` + del + ` RETURNING h.*)
INSERT INTO ` + tbl.WithSuffix(schema.ArchiveSuffix).Qualified() + ` (` + cols + `, state, attempts, last_error_code, last_error_message)
SELECT ` + cols + `, '` + schema.ArchiveDead + `', attempts, last_error_code, last_error_message FROM moved`
}

// trimBatchLogSQL deletes batch log rows older than the retention: $1 seconds, $2
// batch size. It looks at the BatchSize oldest batches only (batch numbers ascend
// with time): a chunk is one short range of the primary key, and the run ends at the
// first chunk with nothing old enough.
func trimBatchLogSQL(tbl pgident.Table) string {
	b := tbl.WithSuffix(schema.BatchSuffix).Qualified()
	return `DELETE FROM ` + b + ` WHERE batch = ANY (ARRAY(
    SELECT batch FROM (SELECT batch, at FROM ` + b + ` ORDER BY batch LIMIT $2) v
    WHERE v.at < now() - make_interval(secs => $1)))`
}
