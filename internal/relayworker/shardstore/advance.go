// advance.go: the fenced advance. After a batch was published, one statement moves
// each of its shards' cursors, renews their leases, writes the hold rows of the
// events that were not published, and logs the batch, all only for the shards the
// batch's tokens still hold. A crash before it re-reads the batch (duplicates, as
// v1); after it, the cursor is past every event and each one is either on Kafka or
// in the hold table: a failure record is never lost and no event is skipped.

package shardstore

import (
	"context"
	"fmt"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// Advance applies a. Shards it did not move had their lease taken over: their hold
// rows were not written either, and their new owner reads their events again.
func (s *Store) Advance(ctx context.Context, a Advance) (Advanced, error) {
	if len(a.Windows) == 0 {
		return Advanced{}, nil
	}
	if len(a.Partitions) != len(a.Offsets) || len(a.Seqs) != len(a.Offsets) {
		return Advanced{}, fmt.Errorf("advance: %d partitions, %d offsets and %d seqs", len(a.Partitions), len(a.Offsets), len(a.Seqs))
	}
	n := len(a.Windows)
	shards, tokens, last, lo, hi, stamps, done := make([]int64, n), make([]string, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]bool, n)
	for i, w := range a.Windows {
		shards[i], tokens[i], last[i], lo[i], hi[i], stamps[i], done[i] = int64(w.Shard), w.Token, w.Last, w.LoTick, w.HiTick, w.HiStamp, w.Done
	}
	m := len(a.Holds)
	ids, states, attempts, delays, codes, msgs := make([]string, m), make([]string, m), make([]int64, m), make([]int64, m), make([]string, m), make([]string, m)
	for i, h := range a.Holds {
		ids[i], states[i], attempts[i], delays[i], codes[i], msgs[i] = h.EventID, h.State, int64(h.Attempts), h.RetryIn.Milliseconds(), h.Code, h.Message
	}
	if a.Offsets == nil {
		a.Offsets = []int64{} // an empty array, not NULL
	}
	if a.Seqs == nil {
		a.Seqs = []int64{}
	}
	parts := make([]int64, len(a.Partitions))
	for i, p := range a.Partitions {
		parts[i] = int64(p)
	}
	var out Advanced
	var moved, stale pq.Int64Array
	st, err := s.prepared(ctx, advanceSQL(s.t))
	if err != nil {
		return Advanced{}, fmt.Errorf("advance %s: %w", s.t, err)
	}
	err = st.QueryRowContext(ctx, s.workerID, pq.Array(lo),
		pq.Array(shards), pq.Array(tokens), pq.Array(last), pq.Array(hi), pq.Array(done),
		pq.Array(parts), pq.Array(a.Offsets),
		pq.Array(ids), pq.Array(states), pq.Array(attempts), pq.Array(delays), pq.Array(codes), pq.Array(msgs), pq.Array(a.Seqs),
		pq.Array(stamps),
	).Scan(&moved, &stale, &out.Holds, &out.Batch)
	if err != nil {
		return Advanced{}, fmt.Errorf("advance %s: %w", s.t, err)
	}
	for _, sh := range moved {
		out.Shards = append(out.Shards, int16(sh))
	}
	for _, sh := range stale {
		out.Stale = append(out.Stale, int16(sh))
	}
	return out, nil
}

// advanceSQL: $1 the worker id; per window $3 shard, $4 token, $2 lo tick, $5 last
// seq, $6 hi tick, $17 its TickStamp, $7 done; per published event $8 partition, $9
// offset, $16 seq; per hold row $10 event id, $11 state, $12 attempts, $13 retry
// delay (ms), $14 code, $15 message. The seqs (8 bytes an event before compression)
// map an event to its partition and offset (kubectl outbox trace): the batch log's
// arrays are parallel.
//
// The fence is the lease row: locked (FOR NO KEY UPDATE) with the window's token in
// it, so a takeover's UPDATE of the row waits for this statement's commit, and a
// takeover that came first leaves nothing to lock (the row's new version, rechecked
// after the wait, has another owner). Each locked shard gets a cursor log row: a done
// window closes (lo_tick = hi, no hi_tick or pos), another keeps its lo and goes on
// after pos against the fixed hi. The lease is not renewed here (Renew does, per
// token): the advance writes nothing in place.
//
// A window moves only while its hi tick is the one it was read under (number and
// stamp: ticks commit asynchronously, tickLockSQL says why); the others are returned
// as stale. The hold rows copy the outbox row by event id, and only for a shard that
// moved; ON CONFLICT keeps a row that is already there (the event was held before:
// its state is newer than this batch's).
func advanceSQL(t pgident.Table) string {
	return `WITH u AS (
    SELECT * FROM unnest($3::smallint[], $4::text[], $5::bigint[], $2::bigint[], $6::bigint[], $7::bool[], $17::bigint[])
        AS u(shard, token, last_seq, lo_tick, hi_tick, done, hi_stamp)
), ok AS (
    SELECT u.* FROM u JOIN ` + side(t, schema.TickSuffix) + ` k ON k.tick = u.hi_tick AND ` + TickStamp(`k.at`) + ` = u.hi_stamp
), fenced AS (
    SELECT u.* FROM ` + side(t, schema.LeaseSuffix) + ` l JOIN ok u ON l.shard = u.shard AND l.owner = u.token
    ORDER BY l.shard
    FOR NO KEY UPDATE OF l
), adv AS (
    INSERT INTO ` + side(t, schema.CursorSuffix) + ` (shard, lo_tick, hi_tick, pos)
    SELECT shard, CASE WHEN done THEN hi_tick ELSE lo_tick END, CASE WHEN done THEN NULL ELSE hi_tick END,
           CASE WHEN done THEN NULL ELSE last_seq END
    FROM fenced ORDER BY shard
    RETURNING shard
), held AS (
    INSERT INTO ` + side(t, schema.HoldSuffix) + ` (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
        event_version, destination, message_key, payload, headers, created_at, txid, seq, shard,
        state, attempts, next_attempt_at, last_error_code, last_error_message)
    SELECT o.event_id, o.aggregate_type, o.aggregate_id, o.aggregate_version, o.event_type,
           o.event_version, o.destination, o.message_key, o.payload, o.headers, o.created_at, o.txid, o.seq, o.shard,
           x.state, x.attempts, now() + x.delay_ms * interval '1 millisecond', NULLIF(x.code, ''), NULLIF(x.message, '')
    FROM unnest($10::text[], $11::text[], $12::int[], $13::bigint[], $14::text[], $15::text[])
         AS x(event_id, state, attempts, delay_ms, code, message)
    JOIN ` + t.Qualified() + ` o ON o.event_id = x.event_id
    WHERE o.shard IN (SELECT shard FROM fenced)
    ON CONFLICT (event_id) DO NOTHING
    RETURNING 1
), log AS (
    INSERT INTO ` + side(t, schema.BatchSuffix) + ` (owner, shards, last_seq, hi_tick, partitions, offsets, seqs)
    SELECT $1, array_agg(shard), array_agg(last_seq), array_agg(hi_tick), $8::int[], $9::bigint[], $16::bigint[]
    FROM fenced HAVING count(*) > 0
    RETURNING batch
)
SELECT COALESCE((SELECT array_agg(shard ORDER BY shard) FROM adv), '{}'),
       COALESCE((SELECT array_agg(shard ORDER BY shard) FROM u WHERE shard NOT IN (SELECT shard FROM ok)), '{}'),
       (SELECT count(*) FROM held), COALESCE((SELECT batch FROM log), 0)`
}
