// claim.go: the one-statement claim, and why it is shaped the way it is.

package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// ClaimSQL is the one-statement claim. Claimable rows are PENDING/RETRY rows whose
// next_retry_at has come and SENDING rows whose lease expired: a claim sets
// next_retry_at = lease_until, so "claimable" is uniformly
// `status IN (non-terminal) AND next_retry_at <= now()` on the database clock.
//
// Order per aggregate: a row is only claimed when no older version of its aggregate is
// non-terminal, unless that older version is claimed by this very statement (then the
// relay publishes both in version order in one write). Rows are locked with
// SKIP LOCKED, so a concurrent claimer skips them instead of waiting; a newer version
// whose older version another worker has locked or owns is left alone.
//
// Expired leases, RETRY and PENDING rows are taken from three ordered index scans so
// a large PENDING backlog cannot starve retries and take-overs; each scan stops after
// the batch is full.
func ClaimSQL(t pgident.Table) string { return claimSQL(t, "$1", "$2", "$3", "") }

// Planner settings: each claim is sent as one simple query that starts with its
// settings, so they hold for that claim alone (a simple query's statements are one
// transaction, and SET LOCAL ends with it).
const (
	// ClaimSettings precede the polling claim. With a small live backlog the planner
	// prefers a bitmap scan of the dispatch index plus a sort, and bitmap scans never
	// mark the index entries of claimed (now dead) row versions as dead. Those entries
	// pile up until VACUUM and every claim rereads them (measured at 5,000 events/s:
	// 16,000 dead entries, 9 ms per claim after 30 s, and growing). An ordered index
	// scan stops at the batch size and flags each dead entry the first time it passes it.
	ClaimSettings = `SET LOCAL enable_bitmapscan = off; `
	// ClaimIDsSettings precede the claim by id. Without them the planner reads a few
	// hundred ids out of the whole table with a sequential scan (500 of 50,000 rows:
	// 9 ms, and growing with the SENT history), where primary-key probes cost well
	// under a millisecond.
	ClaimIDsSettings = `SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; `
)

// claimSQL builds the claim with its owner token, batch size and lease as SQL text
// (placeholders or literals). handoverAfter, when not empty, is an interval literal: then
// PENDING rows are claimable only that long after their next_retry_at (their insert
// time), because in logical-replication mode the slot's reader claims new rows by id
// (ClaimIDs) and polling takes only what it left (contract.DefaultHandoverAfter).
func claimSQL(t pgident.Table, token, limit, lease, handoverAfter string) string {
	q := t.Qualified()
	// OFFSET 0 keeps each NOT EXISTS a per-row probe of the _aggregate_inflight_idx
	// partial index; flattened into an anti join the planner hashes the whole hot set
	// on every claim (measured: 25 ms instead of 2 ms per 500-row claim at 50k backlog).
	//
	// A row is also skipped when an older version of its aggregate comes after it in
	// the claim's scan order (exp, ret, pen; then next_retry_at, created_at and, for
	// ties, the heap position, which is the index's order for equal keys): a released or
	// re-timed older version (next_retry_at = now()) sorts behind newer versions that
	// kept their insert time. Without this the batch would fill up with those newer
	// versions, which the order check below then drops, the older one would never be
	// reached, and the aggregate (and every aggregate behind it) would starve.
	rank := func(a string) string {
		return `(CASE ` + a + `.status WHEN 'SENDING' THEN 0 WHEN 'RETRY' THEN 1 ELSE 2 END)`
	}
	free := `NOT EXISTS (SELECT 1 FROM ` + q + ` p
        WHERE p.aggregate_type = o.aggregate_type AND p.aggregate_id = o.aggregate_id
          AND p.aggregate_version < o.aggregate_version
          AND p.status IN ` + schema.NonTerminalIn + `
          AND (p.next_retry_at > now()
               OR (` + rank("p") + `, p.next_retry_at, p.created_at, p.ctid) > (` + rank("o") + `, o.next_retry_at, o.created_at, o.ctid))
        OFFSET 0)`
	scan := func(status, limit string) string {
		due := `now()`
		if status == "PENDING" && handoverAfter != "" {
			due = `now() - ` + handoverAfter + `::interval`
		}
		return `SELECT o.event_id, o.aggregate_type, o.aggregate_id, o.aggregate_version, o.status FROM ` + q + ` o
    WHERE o.status = '` + status + `' AND o.next_retry_at <= ` + due + ` AND ` + free + `
    ORDER BY o.next_retry_at, o.created_at
    LIMIT ` + limit + `
    FOR UPDATE SKIP LOCKED`
	}
	return `WITH exp AS (
    ` + scan("SENDING", limit) + `
), ret AS (
    ` + scan("RETRY", limit) + `
), pen AS (
    ` + scan("PENDING", limit) + `
), cand AS (
    -- CTE scans run on demand: once the batch came from exp and ret, pen is not read on.
    SELECT * FROM (SELECT * FROM exp UNION ALL SELECT * FROM ret UNION ALL SELECT * FROM pen) u LIMIT ` + limit + `
), ` + claimTail(q, token, lease)
}

// ClaimIDsSQL is the claim of the rows whose inserts logical replication delivered:
// the PENDING rows among the ids, with the same per-aggregate order rule, lease and
// RETURNING as the polling claim (so publish and mark cannot tell the two apart).
// A row another worker locked or claimed, or one already SENT, is skipped.
func ClaimIDsSQL(t pgident.Table) string { return claimIDsSQL(t, "$1", "$2", "$3") }

func claimIDsSQL(t pgident.Table, token, ids, lease string) string {
	q := t.Qualified()
	return `WITH cand AS (
    SELECT o.event_id, o.aggregate_type, o.aggregate_id, o.aggregate_version, o.status FROM ` + q + ` o
    WHERE o.event_id = ANY (` + ids + `::text[]) AND o.status = 'PENDING'
    FOR UPDATE SKIP LOCKED
), ` + claimTail(q, token, lease)
}

// claimTail is the part of both claims after the candidates: the per-aggregate order
// check, then the update that takes the rows.
func claimTail(q, token, lease string) string {
	return `ok AS (
    SELECT c.event_id, c.status = 'SENDING' AS expired
    FROM cand c
    WHERE NOT EXISTS (SELECT 1 FROM ` + q + ` p
        WHERE p.aggregate_type = c.aggregate_type AND p.aggregate_id = c.aggregate_id
          AND p.aggregate_version < c.aggregate_version
          AND p.status IN ` + schema.NonTerminalIn + `
          AND p.event_id NOT IN (SELECT event_id FROM cand) OFFSET 0)
), durability AS (
    -- The claim's commit need not wait for its WAL flush: a claim lost in a crash
    -- only hands its rows back as they were (PENDING/RETRY), so they are published
    -- again (a duplicate, never a loss). Every mark stays a synchronous commit, and
    -- flushes the claim's WAL with its own.
    SELECT set_config('synchronous_commit', 'off', true) AS v
)
UPDATE ` + q + ` t
SET status = 'SENDING', owner_token = ` + token + `,
    lease_until = now() + ` + lease + `::interval, next_retry_at = now() + ` + lease + `::interval,
    updated_at = now()
FROM ok, durability
WHERE t.event_id = ok.event_id AND t.event_id = ANY (ARRAY(SELECT event_id FROM ok))
RETURNING t.event_id, t.aggregate_type, t.aggregate_id, t.aggregate_version, t.event_type,
    t.event_version, t.destination, t.message_key, t.payload, t.headers, t.retry_count,
    t.created_at, EXTRACT(EPOCH FROM now() - t.created_at)::float8, ok.expired`
}

func interval(d time.Duration) string { return fmt.Sprintf("%d milliseconds", d.Milliseconds()) }

// Claim claims up to n rows for owner token for the lease duration (database clock).
func (s *Store) Claim(ctx context.Context, token string, n int, lease time.Duration) ([]event.Row, error) {
	s.Statements.Add(1)
	return s.claimRows(ctx, claimQuery(s.t, token, n, lease, s.handoverAfter), n)
}

// claimQuery is the polling claim as Claim sends it. Not a server-side prepared
// statement: after five executions PostgreSQL may switch a prepared statement to a
// generic plan built without knowing the batch size and from the statistics of a
// then-empty table (measured: 100 ms per claim instead of 5 ms). Sent as one simple
// query (no bind parameters: the values are quoted literals), it is planned with the
// real values every time, after ClaimSettings. So it is rendered for every claim,
// with that claim's values.
func claimQuery(t pgident.Table, token string, n int, lease, handoverAfter time.Duration) string {
	age := ""
	if handoverAfter > 0 {
		age = pq.QuoteLiteral(interval(handoverAfter))
	}
	return ClaimSettings + claimSQL(t, pq.QuoteLiteral(token), strconv.Itoa(n), pq.QuoteLiteral(interval(lease)), age)
}

// ClaimIDs claims, for owner token and the lease, the PENDING rows among ids (the
// inserts logical replication delivered), under the polling claim's order rule.
func (s *Store) ClaimIDs(ctx context.Context, token string, ids []string, lease time.Duration) ([]event.Row, error) {
	s.Statements.Add(1)
	return s.claimRows(ctx, claimIDsQuery(s.t, token, ids, lease), len(ids))
}

// claimIDsQuery is the claim by id as ClaimIDs sends it: a simple query with quoted
// literals, like claimQuery, so it is planned with the real ids, after
// ClaimIDsSettings.
func claimIDsQuery(t pgident.Table, token string, ids []string, lease time.Duration) string {
	var b strings.Builder
	b.WriteString("ARRAY[")
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(pq.QuoteLiteral(id))
	}
	b.WriteString("]")
	return ClaimIDsSettings + claimIDsSQL(t, pq.QuoteLiteral(token), b.String(), pq.QuoteLiteral(interval(lease)))
}

// Settled returns the ids among ids whose rows are visible and no longer PENDING
// (claimed by someone else, or already sent).
func (s *Store) Settled(ctx context.Context, ids []string) ([]string, error) {
	s.Statements.Add(1)
	rows, err := s.db.QueryContext(ctx, settledSQL(s.t), pq.Array(ids))
	if err != nil {
		return nil, fmt.Errorf("settled: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("settled: scan: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func settledSQL(t pgident.Table) string {
	return `SELECT event_id FROM ` + t.Qualified() + ` WHERE event_id = ANY ($1::text[]) AND status <> 'PENDING'`
}

// claimRows runs a claim statement and scans what it returned.
func (s *Store) claimRows(ctx context.Context, q string, n int) ([]event.Row, error) {
	rows, err := s.db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	defer rows.Close()
	out := make([]event.Row, 0, n)
	for rows.Next() {
		var r event.Row
		var age float64
		if err := rows.Scan(&r.EventID, &r.AggregateType, &r.AggregateID, &r.AggregateVersion,
			&r.EventType, &r.EventVersion, &r.Destination, &r.MessageKey, &r.Payload, &r.Headers,
			&r.RetryCount, &r.CreatedAt, &age, &r.Expired); err != nil {
			return nil, fmt.Errorf("claim: scan: %w", err)
		}
		r.Age = time.Duration(age * float64(time.Second))
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return out, nil
}
