package inbox

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/lib/pq"
)

// claimSQL is steps 1 to 3 of Handle for a whole batch in one round trip: insert the
// dedup rows first (ON CONFLICT DO NOTHING under the primary key), read what an
// existing row says, and advance each aggregate's last applied version to the
// batch's newest. The lookups are correlated subqueries, so each is one primary-key
// probe whatever plan the prepared statement settles on (a generic plan that joins
// the whole dedup table costs milliseconds per message). The final SELECT runs on
// the statement's snapshot: it sees the rows
// that existed before (a duplicate's hash, the previous version), not the ones this
// statement inserts. Versions are upserted in key order so two consumers that share
// aggregates (during a rebalance) lock them in the same order and cannot deadlock.
func claimSQL(consume, version string) string {
	return `WITH input AS (
    SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[]) WITH ORDINALITY
        AS i(event_id, event_type, request_hash, aggregate_type, aggregate_id, aggregate_version, ord)
), ins AS (
    INSERT INTO ` + consume + ` (consumer_group, event_id, event_type, request_hash, status)
    SELECT $1, event_id, event_type, request_hash, 'SUCCESS' FROM input ORDER BY ord
    ON CONFLICT (consumer_group, event_id) DO NOTHING
    RETURNING event_id
), up AS (
    INSERT INTO ` + version + ` AS v (consumer_group, aggregate_type, aggregate_id, last_version)
    SELECT $1, i.aggregate_type, i.aggregate_id, max(i.aggregate_version)
    FROM input i JOIN ins USING (event_id) WHERE i.aggregate_id <> ''
    GROUP BY i.aggregate_type, i.aggregate_id ORDER BY i.aggregate_type, i.aggregate_id
    ON CONFLICT (consumer_group, aggregate_type, aggregate_id)
    DO UPDATE SET last_version = EXCLUDED.last_version, updated_at = now()
    WHERE v.last_version < EXCLUDED.last_version
    RETURNING aggregate_type, aggregate_id
)
SELECT i.ord,
       i.event_id IN (SELECT event_id FROM ins),
       (SELECT c.request_hash FROM ` + consume + ` c WHERE c.consumer_group = $1 AND c.event_id = i.event_id),
       (SELECT p.last_version FROM ` + version + ` p
         WHERE p.consumer_group = $1 AND p.aggregate_type = i.aggregate_type AND p.aggregate_id = i.aggregate_id),
       (i.aggregate_type, i.aggregate_id) IN (SELECT aggregate_type, aggregate_id FROM up)
FROM input i
ORDER BY i.ord`
}

// finishSQL records what the handlers returned and which rows were stale, for the
// rows that need it (most need nothing: the dedup row went in as SUCCESS).
func finishSQL(consume string) string {
	return `UPDATE ` + consume + ` c
SET status = CASE WHEN u.stale THEN 'STALE' ELSE c.status END, result_ref = NULLIF(u.ref, ''), updated_at = now()
FROM unnest($2::text[], $3::bool[], $4::text[]) AS u(event_id, stale, ref)
WHERE c.consumer_group = $1 AND c.event_id = u.event_id`
}

// prepared statements: lib/pq sends an unprepared statement with parameters in two
// round trips (parse and describe, then bind and execute), a prepared one in one.
type prepared struct{ claim, claimOne, finish *sql.Stmt }

func (s *Store) prepare(ctx context.Context) error {
	s.prepMu.Lock()
	defer s.prepMu.Unlock()
	if s.stmts.claim != nil {
		return nil
	}
	claim, err := s.db.PrepareContext(ctx, claimSQL(s.consume, s.version))
	if err != nil {
		return storeErr("prepare (run inbox.Migrate?): %w", err) // tried again next time
	}
	one, err := s.db.PrepareContext(ctx, claimOneSQL(s.consume, s.version))
	if err != nil {
		claim.Close()
		return storeErr("prepare (run inbox.Migrate?): %w", err)
	}
	finish, err := s.db.PrepareContext(ctx, finishSQL(s.consume))
	if err != nil {
		claim.Close()
		one.Close()
		return storeErr("prepare (run inbox.Migrate?): %w", err)
	}
	s.stmts = prepared{claim: claim, claimOne: one, finish: finish}
	return nil
}

// claimResult is what claimSQL says about one message.
type claimResult struct {
	inserted    bool
	outcome     Outcome
	prevVersion int64
}

// claimOne runs claimSQL for a single message.
// claimOne is claimBatch for one message, with claimOneSQL: scalar parameters cost
// PostgreSQL and the driver less than one-element arrays, and one message per
// transaction is the common case.
func (s *Store) claimOne(ctx context.Context, tx *sql.Tx, m Message) (claimResult, error) {
	if err := s.prepare(ctx); err != nil {
		return claimResult{}, err
	}
	hash := m.RequestHash()
	var r claimRow
	if err := tx.StmtContext(ctx, s.stmts.claimOne).QueryRowContext(ctx, s.group, m.EventID, m.EventType, hash,
		m.AggregateType, m.AggregateID, m.AggregateVersion).Scan(&r.inserted, &r.prevHash, &r.prevVersion, &r.advanced); err != nil {
		return claimResult{}, storeErr("claim event %s: %w", m.EventID, err)
	}
	if !r.inserted {
		if err := s.sameContent(ctx, tx, m, hash, r.prevHash); err != nil {
			return claimResult{}, err
		}
		return claimResult{outcome: Duplicate}, nil
	}
	return decideVersion(m, r.prevVersion, r.advanced, map[aggKey]int64{}), nil
}

// claimOneSQL is claimSQL for a single message.
func claimOneSQL(consume, version string) string {
	return `WITH ins AS (
    INSERT INTO ` + consume + ` (consumer_group, event_id, event_type, request_hash, status)
    VALUES ($1, $2, $3, $4, 'SUCCESS')
    ON CONFLICT (consumer_group, event_id) DO NOTHING
    RETURNING 1
), up AS (
    INSERT INTO ` + version + ` AS v (consumer_group, aggregate_type, aggregate_id, last_version)
    SELECT $1, $5, $6, $7 WHERE $6 <> '' AND EXISTS (SELECT 1 FROM ins)
    ON CONFLICT (consumer_group, aggregate_type, aggregate_id)
    DO UPDATE SET last_version = EXCLUDED.last_version, updated_at = now()
    WHERE v.last_version < EXCLUDED.last_version
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM ins),
       (SELECT c.request_hash FROM ` + consume + ` c WHERE c.consumer_group = $1 AND c.event_id = $2),
       (SELECT p.last_version FROM ` + version + ` p
         WHERE p.consumer_group = $1 AND p.aggregate_type = $5 AND p.aggregate_id = $6),
       EXISTS (SELECT 1 FROM up)`
}

// claimBatch runs claimSQL for msgs (distinct event ids) and decides each message's
// outcome in batch order: a version at or below the aggregate's last applied one
// (counting earlier messages of the batch) is Stale; one past last + 1 is a Gap.
// A different hash under a known event id is ErrPayloadConflict for the whole call.
func (s *Store) claimBatch(ctx context.Context, tx *sql.Tx, msgs []Message) ([]claimResult, error) {
	if err := s.prepare(ctx); err != nil {
		return nil, err
	}
	cols := claimColumns(msgs)
	rows, err := tx.StmtContext(ctx, s.stmts.claim).QueryContext(ctx, s.group,
		pq.Array(cols.ids), pq.Array(cols.types), pq.Array(cols.hashes),
		pq.Array(cols.aggTypes), pq.Array(cols.aggIDs), pq.Array(cols.versions))
	if err != nil {
		return nil, storeErr("claim %d events (first %s): %w", len(msgs), msgs[0].EventID, err)
	}
	scanned, err := scanClaims(rows, len(msgs))
	if err != nil {
		return nil, err
	}
	out := make([]claimResult, len(msgs))
	last := map[aggKey]int64{}
	for i, r := range scanned {
		if !r.inserted {
			// After the rows are closed: lib/pq runs one statement at a time.
			if err := s.sameContent(ctx, tx, msgs[i], cols.hashes[i], r.prevHash); err != nil {
				return nil, err
			}
			out[i] = claimResult{outcome: Duplicate}
			continue
		}
		out[i] = decideVersion(msgs[i], r.prevVersion, r.advanced, last)
	}
	return out, nil
}

// claimRow is one row of claimSQL's answer.
type claimRow struct {
	inserted    bool
	prevHash    sql.NullString
	prevVersion sql.NullInt64
	advanced    bool
}

func scanClaims(rows *sql.Rows, n int) ([]claimRow, error) {
	defer rows.Close()
	out := make([]claimRow, n)
	for rows.Next() {
		var ord int
		var r claimRow
		if err := rows.Scan(&ord, &r.inserted, &r.prevHash, &r.prevVersion, &r.advanced); err != nil {
			return nil, storeErr("claim: %w", err)
		}
		out[ord-1] = r
	}
	if err := rows.Err(); err != nil {
		return nil, storeErr("claim: %w", err)
	}
	return out, nil
}

type aggKey struct{ typ, id string }

// decideVersion is the version guard for one inserted message. last carries the
// newest version seen so far in the batch per aggregate.
func decideVersion(m Message, prevVer sql.NullInt64, advanced bool, last map[aggKey]int64) claimResult {
	r := claimResult{inserted: true, outcome: Applied}
	if m.AggregateID == "" {
		return r
	}
	k := aggKey{m.AggregateType, m.AggregateID}
	cur, seen := last[k]
	if !seen && prevVer.Valid {
		cur, seen = prevVer.Int64, true
	}
	r.prevVersion = cur
	switch {
	case !advanced || seen && m.AggregateVersion <= cur:
		r.outcome = Stale // nothing in the batch moved the version: a newer one is applied
	case seen && m.AggregateVersion > cur+1:
		r.outcome = Gap
	}
	if r.outcome != Stale {
		last[k] = m.AggregateVersion
	}
	return r
}

// sameContent checks a duplicate's hash against the first delivery's. prevHash is
// NULL when the first delivery committed while this statement waited on the key (its
// snapshot predates that commit): read the row again.
func (s *Store) sameContent(ctx context.Context, tx *sql.Tx, m Message, hash string, prevHash sql.NullString) error {
	if !prevHash.Valid {
		if err := tx.QueryRowContext(ctx, `SELECT request_hash FROM `+s.consume+
			` WHERE consumer_group = $1 AND event_id = $2`, s.group, m.EventID).Scan(&prevHash); err != nil {
			return storeErr("read event %s: %w", m.EventID, err)
		}
	}
	if prevHash.String != hash {
		return fmt.Errorf("%w: event %s", ErrPayloadConflict, m.EventID)
	}
	return nil
}

type claimCols struct {
	ids, types, hashes, aggTypes, aggIDs []string
	versions                             []int64
}

func claimColumns(msgs []Message) claimCols {
	var c claimCols
	for _, m := range msgs {
		c.ids = append(c.ids, m.EventID)
		c.types = append(c.types, m.EventType)
		c.hashes = append(c.hashes, m.RequestHash())
		c.aggTypes = append(c.aggTypes, m.AggregateType)
		c.aggIDs = append(c.aggIDs, m.AggregateID)
		c.versions = append(c.versions, m.AggregateVersion)
	}
	return c
}

// finishRow is what one handled message leaves in its dedup row.
type finishRow struct {
	eventID string
	stale   bool
	ref     string
}

func (s *Store) finish(ctx context.Context, tx *sql.Tx, rows []finishRow) error {
	var ids, refs []string
	var stale []bool
	for _, r := range rows {
		if r.stale || r.ref != "" {
			ids, stale, refs = append(ids, r.eventID), append(stale, r.stale), append(refs, r.ref)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := tx.StmtContext(ctx, s.stmts.finish).ExecContext(ctx, s.group, pq.Array(ids), pq.Array(stale), pq.Array(refs)); err != nil {
		return storeErr("record results of %d events: %w", len(ids), err)
	}
	return nil
}
