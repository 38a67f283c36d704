// gate_worker.go: one v2 reader of the gate spike: read a batch of its shards,
// "publish" it (no broker: the statements alone, as limits.go measures v1), and
// advance the shards' cursors fenced by its owner token.

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// gateRow is one event the read returned (seq 0: the sentinel of an exhausted window).
type gateRow struct {
	shard   int16
	hiTick  int64
	seq     int64
	eventID string
	aggType string
	aggID   string
	version int64
	payload []byte
	headers []byte
}

// segment is one shard's part of a batch: where its cursor goes.
type segment struct {
	shard  int16
	hiTick int64
	last   int64 // last seq read (0: only a sentinel)
	done   bool  // the window is exhausted: close it
	rows   int
}

// gateReader runs the read and advance statements for one owner token.
type gateReader struct {
	read, advance *sql.Stmt
	token         string
	batch         int
	lease         string
}

func newGateReader(ctx context.Context, conn *sql.Conn, token string, batch int) (*gateReader, error) {
	for _, q := range gateReadSettings {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	r := &gateReader{token: token, batch: batch, lease: "30 seconds"}
	var err error
	if r.read, err = conn.PrepareContext(ctx, gateReadSQL); err != nil {
		return nil, fmt.Errorf("prepare read: %w", err)
	}
	if r.advance, err = conn.PrepareContext(ctx, gateAdvanceSQL); err != nil {
		return nil, fmt.Errorf("prepare advance: %w", err)
	}
	return r, nil
}

// readBatch returns the rows of one batch, starting after shard from.
func (r *gateReader) readBatch(ctx context.Context, from int16) ([]gateRow, error) {
	rows, err := r.read.QueryContext(ctx, r.token, r.batch, from)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	defer rows.Close()
	out := make([]gateRow, 0, r.batch)
	for rows.Next() {
		var g gateRow
		var seq, version sql.NullInt64
		var id, at, ai sql.NullString
		var evType, dest, key sql.NullString
		var evVersion sql.NullInt32
		if err := rows.Scan(&g.shard, &g.hiTick, &seq, &id, &at, &ai, &version, &evType, &evVersion,
			&dest, &key, &g.payload, &g.headers); err != nil {
			return nil, fmt.Errorf("read: scan: %w", err)
		}
		g.seq, g.eventID, g.aggType, g.aggID, g.version = seq.Int64, id.String, at.String, ai.String, version.Int64
		out = append(out, g)
	}
	return out, rows.Err()
}

// segments groups a batch by shard (the read returns each shard's rows together)
// and says which windows are exhausted: every shard but the last one of a full
// batch was read to its end, and a sentinel says so for the last one.
func segments(rows []gateRow, batch int) []segment {
	var segs []segment
	for _, g := range rows {
		if len(segs) == 0 || segs[len(segs)-1].shard != g.shard {
			segs = append(segs, segment{shard: g.shard, hiTick: g.hiTick})
		}
		s := &segs[len(segs)-1]
		if g.seq == 0 {
			s.done = true
			continue
		}
		s.last, s.rows = g.seq, s.rows+1
	}
	for i := range segs {
		if i < len(segs)-1 || len(rows) < batch {
			segs[i].done = true
		}
	}
	return segs
}

// errLeaseLost: the fenced advance moved fewer shards than the batch had.
var errLeaseLost = errors.New("lease lost: the fenced advance changed fewer shards than the batch read")

// advanceBatch records the batch (the log row carries each event's partition and
// offset, as the publisher would report them) and moves the cursors.
func (r *gateReader) advanceBatch(ctx context.Context, segs []segment, parts []int64, offs []int64) error {
	shards := make([]int64, len(segs))
	last := make([]int64, len(segs))
	hi := make([]int64, len(segs))
	done := make([]bool, len(segs))
	for i, s := range segs {
		shards[i], last[i], hi[i], done[i] = int64(s.shard), s.last, s.hiTick, s.done
	}
	var n int
	err := r.advance.QueryRowContext(ctx, r.token, pq.Array(shards), pq.Array(last), pq.Array(hi), pq.Array(done),
		r.lease, pq.Array(parts), pq.Array(offs)).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) || err == nil && n < len(segs) {
		return errLeaseLost
	}
	if err != nil {
		return fmt.Errorf("advance: %w", err)
	}
	return nil
}

// drain reads and advances until a read finds nothing; seen gets each event's seq
// (the caller checks once-only and order).
func (r *gateReader) drain(ctx context.Context, seen func(gateRow)) error {
	var from int16
	for {
		rows, err := r.readBatch(ctx, from)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		parts, offs := []int64{}, []int64{}
		for _, g := range rows {
			if g.seq != 0 {
				seen(g)
				parts, offs = append(parts, int64(g.seq%12)), append(offs, int64(len(offs)))
			}
		}
		segs := segments(rows, r.batch)
		if err := r.advanceBatch(ctx, segs, parts, offs); err != nil {
			return err
		}
		from = segs[len(segs)-1].shard
	}
}

// gateTick records a tick.
func gateTick(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, gateTickSQL); err != nil {
		return fmt.Errorf("tick: %w", err)
	}
	return nil
}

// gateLease gives each of n tokens its shards; it returns the tokens.
func gateLease(ctx context.Context, db *sql.DB, n int) ([]string, error) {
	toks := make([]string, n)
	for k := range toks {
		toks[k] = fmt.Sprintf("gate-%d/%d", k, time.Now().UnixNano())
		if _, err := db.ExecContext(ctx, gateLeaseSQL, toks[k], k, n); err != nil {
			return nil, fmt.Errorf("lease: %w", err)
		}
	}
	return toks, nil
}
