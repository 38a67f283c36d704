// hold.go: the hold table's due rows and their settlement. Hold rows are written by
// the advance (advance.go); here the owner of a shard reads the ones due now and,
// after trying them, settles them, fenced by its token on the shard.

package shardstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// DueHolds reads up to limit hold rows of the shards tokens hold that are due now,
// in (aggregate, version) order: RETRY rows whose next attempt time has come, and
// HELD rows with no RETRY row of a lower version of their aggregate (a DEAD one does
// not count). The relay publishes them in that order, stopping an aggregate at its
// first failure, and settles each one it tried (Transition, Settle).
func (s *Store) DueHolds(ctx context.Context, tokens []string, limit int) ([]HoldRow, error) {
	if len(tokens) == 0 || limit < 1 {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, dueHoldsSQL(s.t), pq.Array(tokens), limit)
	if err != nil {
		return nil, fmt.Errorf("read due hold rows of %s: %w", s.t, err)
	}
	defer rows.Close()
	var out []HoldRow
	for rows.Next() {
		var h HoldRow
		var payload string
		var code, msg sql.NullString
		if err := rows.Scan(&h.Shard, &h.Token, &h.Seq, &h.EventID, &h.AggregateType, &h.AggregateID, &h.AggregateVersion,
			&h.EventType, &h.EventVersion, &h.Destination, &h.MessageKey, &payload, &h.Headers, &h.CreatedAt,
			&h.State, &h.Attempts, &h.NextAttemptAt, &code, &msg, &h.HeldAt, &h.UpdatedAt); err != nil {
			return nil, fmt.Errorf("read due hold rows of %s: %w", s.t, err)
		}
		h.Payload, h.ErrorCode, h.ErrorMessage, h.RetryCount = []byte(payload), code.String, msg.String, h.Attempts
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read due hold rows of %s: %w", s.t, err)
	}
	return out, nil
}

// dueHoldsSQL: $1 the tokens, $2 how many.
func dueHoldsSQL(t pgident.Table) string {
	hold := side(t, schema.HoldSuffix)
	return `SELECT h.shard, s.owner, h.seq, h.event_id, h.aggregate_type, h.aggregate_id, h.aggregate_version,
       h.event_type, h.event_version, h.destination, h.message_key, h.payload, h.headers, h.created_at,
       h.state, h.attempts, h.next_attempt_at, h.last_error_code, h.last_error_message, h.held_at, h.updated_at
FROM ` + side(t, schema.LeaseSuffix) + ` s
JOIN ` + hold + ` h ON h.shard = s.shard AND h.` + schema.OpenHold + `
WHERE s.owner = ANY ($1::text[])
  AND CASE WHEN h.state = '` + schema.StatusRetry + `' THEN h.next_attempt_at <= now()
           ELSE NOT EXISTS (SELECT FROM ` + hold + ` r
                            WHERE r.aggregate_type = h.aggregate_type AND r.aggregate_id = h.aggregate_id
                              AND r.aggregate_version < h.aggregate_version AND r.state = '` + schema.StatusRetry + `') END
ORDER BY h.aggregate_type, h.aggregate_id, h.aggregate_version
LIMIT $2`
}

// Settle applies settlements, each only while its token holds the row's shard, in
// one statement; it returns how many rows it changed (fewer: those leases are lost,
// the new owner tries the rows again).
func (s *Store) Settle(ctx context.Context, st []Settlement) (int, error) {
	if len(st) == 0 {
		return 0, nil
	}
	n := len(st)
	ids, tokens, states, codes, msgs := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	del, count, logged := make([]bool, n), make([]bool, n), make([]bool, n)
	delays, parts, offsets := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, x := range st {
		ids[i], tokens[i], states[i], codes[i], msgs[i] = x.EventID, x.Token, x.State, x.Code, x.Message
		del[i], count[i], delays[i] = x.Delete, x.CountAttempt, x.RetryIn.Milliseconds()
		logged[i], parts[i], offsets[i] = x.Delete && x.Logged, int64(x.Partition), x.Offset
	}
	var changed int
	if err := s.db.QueryRowContext(ctx, settleSQL(s.t), pq.Array(ids), pq.Array(tokens), pq.Array(del), pq.Array(states),
		pq.Array(count), pq.Array(delays), pq.Array(codes), pq.Array(msgs),
		pq.Array(logged), pq.Array(parts), pq.Array(offsets), s.workerID).Scan(&changed); err != nil {
		return 0, fmt.Errorf("settle hold rows of %s: %w", s.t, err)
	}
	return changed, nil
}

// settleSQL: per row $1 event id, $2 token, $3 delete, $4 new state, $5 count an
// attempt, $6 retry delay (ms), $7 code, $8 message, $9 log the sent row, $10 its
// partition, $11 its offset; $12 the worker id. The sent rows it deletes and logs make
// one batch log row of no shard (shards, last_seq and hi_tick empty: no cursor moved),
// in seq order: a trace's only record of an event sent from the hold table.
func settleSQL(t pgident.Table) string {
	hold := side(t, schema.HoldSuffix)
	sh := side(t, schema.LeaseSuffix)
	return `WITH u AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::bool[], $4::text[], $5::bool[], $6::bigint[], $7::text[], $8::text[],
                         $9::bool[], $10::int[], $11::bigint[])
        AS u(event_id, token, del, state, counted, delay_ms, code, message, logged, kpart, koff)
), gone AS (
    DELETE FROM ` + hold + ` h USING u, ` + sh + ` s
    WHERE h.event_id = u.event_id AND u.del AND s.shard = h.shard AND s.owner = u.token
    RETURNING h.seq, u.logged, u.kpart, u.koff
), log AS (
    INSERT INTO ` + side(t, schema.BatchSuffix) + ` (owner, shards, last_seq, hi_tick, partitions, offsets, seqs)
    SELECT $12, '{}', '{}', '{}', array_agg(kpart ORDER BY seq), array_agg(koff ORDER BY seq), array_agg(seq ORDER BY seq)
    FROM gone WHERE logged HAVING count(*) > 0
    RETURNING 1
), kept AS (
    UPDATE ` + hold + ` h
    SET state = u.state,
        attempts = h.attempts + CASE WHEN u.counted THEN 1 ELSE 0 END,
        next_attempt_at = now() + u.delay_ms * interval '1 millisecond',
        last_error_code = NULLIF(u.code, ''), last_error_message = NULLIF(u.message, ''),
        updated_at = now()
    FROM u, ` + sh + ` s
    WHERE h.event_id = u.event_id AND NOT u.del AND s.shard = h.shard AND s.owner = u.token
    RETURNING 1
)
SELECT ((SELECT count(*) FROM gone) + (SELECT count(*) FROM kept))::int`
}
