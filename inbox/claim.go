package inbox

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/lib/pq"
)

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
