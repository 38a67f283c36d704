// read.go: the window read. One statement reads up to a batch of events of the
// shards a worker's tokens hold, shard after shard (round robin), each shard's in seq
// order, with a sentinel row after a shard that was read in parts (its window is
// exhausted). docs/contract-v2.md, "The cursor: windows between ticks", says why the
// two parts of a window are exactly its rows.

package shardstore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// readPlanner is the read connection's planner: schema.WindowPlanner, and
//
// plan_cache_mode force_generic_plan: without it the statement is re-planned on
// every call (1.5-5 ms);
//
// random_page_cost 1.1 (the usual value for a server whose data is in memory or on
// SSDs; PostgreSQL's default of 4 assumes spinning disks): the generic plan is made
// once, at the connection's first read, from the statistics of that moment, when the
// cursor log may hold one row per shard. At the default a sequential scan of the log
// per shard then looked cheaper than the backward probe of its primary key, and as
// the log grew between trims every read scanned it 128 times (measured in the drain:
// 9.2 ms reads instead of 3.5, 56,702 events/s instead of 74,250). Disabling
// sequential scans instead (before the memoized tick probes of today's plan) made
// the tick lookups 128 index probes: the read at 5,000 events/s went from 2.0-2.3 to
// 3.3-4.0 ms. Since 2026-12-06 sequential scans are off as well (WindowPlanner), and
// the read at 256 shards did not measurably slow down; on PostgreSQL 13, which has no
// Memoize, not measured.
var readPlanner = append(append([]schema.Setting{}, schema.WindowPlanner...),
	schema.Setting{Name: "random_page_cost", Value: "1.1"},
	schema.Setting{Name: "plan_cache_mode", Value: "force_generic_plan"})

// ReadSettings are readPlanner as the read connection's SET statements.
var ReadSettings = schema.SetStatements(readPlanner)

// Read reads up to limit events of the shards tokens hold, starting with shard from
// (Batch.Next of the previous read), and says where each shard's cursor goes. An
// empty batch means every window of those shards is empty: the worker has caught up
// and may Tick.
func (s *Store) Read(ctx context.Context, tokens []string, from int16, limit int) (Batch, error) {
	if len(tokens) == 0 || limit < 1 {
		return Batch{}, nil
	}
	rows, err := s.readRows(ctx, tokens, from, limit)
	if err != nil {
		return Batch{}, err
	}
	ws, err := windows(rows, limit)
	if err != nil {
		return Batch{}, fmt.Errorf("read %s: %w", s.t, err)
	}
	b := Batch{Windows: ws, Next: from}
	for _, r := range rows {
		if r.Seq != 0 {
			b.Events = append(b.Events, r)
		}
	}
	if len(ws) > 0 {
		b.Next = ws[len(ws)-1].Shard
	}
	return b, nil
}

// readRows runs the read on the read connection (opened, set up and prepared on
// first use, and dropped after an error so the next read starts afresh); a sentinel
// row has Seq 0.
func (s *Store) readRows(ctx context.Context, tokens []string, from int16, limit int) ([]Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.readConn(ctx); err != nil {
		return nil, err
	}
	rows, err := s.read.QueryContext(ctx, pq.Array(tokens), limit, from)
	if err != nil {
		_ = s.dropReadConn()
		return nil, fmt.Errorf("read %s: %w", s.t, err)
	}
	defer rows.Close()
	out := make([]Event, 0, limit)
	for rows.Next() {
		var e Event
		var seq, version, nowUS sql.NullInt64
		var id, aggType, aggID, evType, dest, key sql.NullString
		var evVersion sql.NullInt32
		var created sql.NullTime
		if err := rows.Scan(&e.Shard, &e.Token, &e.LoTick, &e.HiTick, &e.HiStamp, &seq, &id, &aggType, &aggID, &version, &evType, &evVersion,
			&dest, &key, &e.Payload, &e.Headers, &created, &nowUS, &e.Held); err != nil {
			_ = s.dropReadConn()
			return nil, fmt.Errorf("read %s: scan: %w", s.t, err)
		}
		e.Seq, e.EventID, e.AggregateType, e.AggregateID, e.AggregateVersion = seq.Int64, id.String, aggType.String, aggID.String, version.Int64
		e.EventType, e.EventVersion, e.Destination, e.MessageKey = evType.String, int(evVersion.Int32), dest.String, key.String
		// The age on the server's clock: its now() once per read (an InitPlan), less
		// created_at (now() - created_at per row cost 0.4 µs of PostgreSQL CPU per event,
		// a twentieth of the read).
		e.CreatedAt = created.Time
		if created.Valid {
			e.Age = time.Duration(nowUS.Int64-created.Time.UnixMicro()) * time.Microsecond
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		_ = s.dropReadConn()
		return nil, fmt.Errorf("read %s: %w", s.t, err)
	}
	return out, nil
}

// readConn opens the read connection with ReadSettings and prepares the read.
func (s *Store) readConn(ctx context.Context) error {
	if s.conn != nil {
		return nil
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("read connection: %w", err)
	}
	for _, q := range ReadSettings {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			_ = conn.Close()
			return fmt.Errorf("read connection: %s: %w", q, err)
		}
	}
	st, err := conn.PrepareContext(ctx, readSQL(s.t, s.shards))
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("read connection: prepare the read: %w", err)
	}
	s.conn, s.read = conn, st
	return nil
}

// dropReadConn closes the read connection; the next read opens another.
func (s *Store) dropReadConn() error {
	if s.conn == nil {
		return nil
	}
	_ = s.read.Close()
	err := s.conn.Close()
	s.conn, s.read = nil, nil
	return err
}

// eventCols are the outbox columns a read returns, after shard, token and hi_tick.
const eventCols = `o.seq, o.event_id, o.aggregate_type, o.aggregate_id, o.aggregate_version, o.event_type,
            o.event_version, o.destination, o.message_key, o.payload, o.headers, o.created_at`

// readSQL is the window read for a table of n shards: $1 the tokens, $2 the batch
// size, $3 the shard to start with. A shard's cursor is its newest cursor log row
// (schema.NewestCursor: one backward probe of the log's primary key).
//
// A shard's window is (lo, hi]: the transactions visible in tick hi's snapshot and
// not in tick lo's. hi is fixed while a window is read in parts (pos = the last seq
// published, hi_tick set), otherwise it is the newest tick. Its rows are
//   - those with seq <= lo.seq_before whose txid was running at lo and ended by hi:
//     one probe of (shard, txid) per such id (usually there is none). Not
//     "txid = ANY (ids)": PostgreSQL chooses by cost whether an xid8 array is an
//     index condition, and where it was not, that filtered the shard's whole history on every read (measured:
//     30 ms of a 33 ms read of 256 shards with a trickle over 20,000 rows, growing
//     with the table). OFFSET 0 keeps the probe a nested loop (flattened, the planner
//     may hash the shard's rows instead); "o.seq + 0" keeps it off (shard, seq).
//     These rows sort first;
//   - those with seq in (lo.seq_before, hi.seq_after] visible in hi and not in lo:
//     one ordered range scan of (shard, seq).
//
// held flags an event whose aggregate has an open RETRY or HELD hold row. The probe
// per event runs only when the hold table has an open row at all (an InitPlan, once
// per read; the AND evaluates left to right): with none, the usual case, it cost
// 0.4-0.8 µs per event of a 4 µs read (measured from the client, 500 rows of
// ~300-byte payloads).
func readSQL(t pgident.Table, n int) string {
	tick := side(t, schema.TickSuffix)
	hold := side(t, schema.HoldSuffix)
	ns := strconv.Itoa(n)
	return `WITH nw AS (SELECT tick, snap, seq_after, at FROM ` + tick + ` ORDER BY tick DESC LIMIT 1),
w AS (
    SELECT l.shard, l.owner, c.pos, c.lo_tick, lo.snap AS lo_snap, lo.seq_before AS lo_seq,
           COALESCE(fx.tick, nw.tick) AS hi_tick, COALESCE(fx.snap, nw.snap) AS hi_snap,
           COALESCE(fx.seq_after, nw.seq_after) AS hi_seq, ` + TickStamp(`COALESCE(fx.at, nw.at)`) + ` AS hi_stamp
    FROM ` + side(t, schema.LeaseSuffix) + ` l
    CROSS JOIN LATERAL ` + schema.NewestCursor(t, "l.shard", "c.lo_tick, c.hi_tick, c.pos") + ` c
    JOIN ` + tick + ` lo ON lo.tick = c.lo_tick
    LEFT JOIN ` + tick + ` fx ON fx.tick = c.hi_tick
    CROSS JOIN nw
    WHERE l.owner = ANY ($1::text[])
    ORDER BY (l.shard - $3::int + ` + ns + `) % ` + ns + `
)
SELECT w.shard, w.owner, w.lo_tick, w.hi_tick, w.hi_stamp, e.seq, e.event_id, e.aggregate_type, e.aggregate_id, e.aggregate_version,
       e.event_type, e.event_version, e.destination, e.message_key, e.payload, e.headers, e.created_at,
       (SELECT (extract(epoch FROM now()) * 1e6)::bigint),
       e.seq IS NOT NULL AND (SELECT EXISTS (SELECT FROM ` + hold + ` WHERE ` + schema.OpenHold + `))
         AND EXISTS (SELECT FROM ` + hold + ` h
           WHERE h.aggregate_type = e.aggregate_type AND h.aggregate_id = e.aggregate_id AND h.` + schema.OpenHold + `)
FROM w CROSS JOIN LATERAL (
    (SELECT p.*
     FROM pg_snapshot_xip(w.lo_snap) AS en(id)
     CROSS JOIN LATERAL (SELECT ` + eventCols + `
         FROM ` + t.Qualified() + ` o
         WHERE o.shard = w.shard AND o.txid = en.id AND o.seq + 0 > COALESCE(w.pos, 0) AND o.seq + 0 <= w.lo_seq
         OFFSET 0) p
     WHERE pg_visible_in_snapshot(en.id, w.hi_snap)
     ORDER BY p.seq LIMIT $2)
    UNION ALL
    (SELECT ` + eventCols + `
     FROM ` + t.Qualified() + ` o
     WHERE o.shard = w.shard AND o.seq > GREATEST(w.pos, w.lo_seq) AND o.seq <= w.hi_seq
       AND pg_visible_in_snapshot(o.txid, w.hi_snap) AND NOT pg_visible_in_snapshot(o.txid, w.lo_snap)
     ORDER BY o.seq LIMIT $2)
    UNION ALL
    SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE w.pos IS NOT NULL
) e
LIMIT $2`
}
