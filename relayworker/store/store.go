// Package store holds every SQL statement the relay runs against the outbox table:
// the batched claim, the owner-fenced marks, lease release, the cheap backlog gauges
// and the hot-standby probe. Table names only ever come from a validated
// pgident.Table; lease arithmetic only ever uses the database clock (now()).
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// Row is one claimed outbox event.
type Row struct {
	EventID          string
	AggregateType    string
	AggregateID      string
	AggregateVersion int64
	EventType        string
	EventVersion     int
	Destination      string
	MessageKey       string
	Payload          []byte // jsonb text or raw bytea
	Headers          []byte // raw jsonb text; nil when SQL NULL
	RetryCount       int
	CreatedAt        time.Time
	// Age is now() - created_at on the database clock at claim time.
	Age time.Duration
	// Expired is true when the row was taken over from an expired SENDING lease.
	Expired bool
}

// Sent is one successful publish to record.
type Sent struct {
	EventID   string
	Partition int32 // -1 when unknown
	Offset    int64 // -1 when unknown
}

// Failure is one failed publish to record as RETRY (or DEAD when attempts are used
// up) or directly as DEAD.
type Failure struct {
	EventID string
	Code    string
	Message string
	Delay   time.Duration // RETRY only: backoff before the next attempt
	// Uncounted: RETRY without using up an attempt (waiting for a missing topic is
	// bounded by its grace period, not by --max-attempts).
	Uncounted bool
}

// Store runs the relay's statements. It is safe for concurrent use.
type Store struct {
	db *sql.DB
	t  pgident.Table

	sent, retry, dead, release, stats *sql.Stmt

	// Statements counts statements sent to PostgreSQL (benchmarks report it per event).
	Statements atomic.Int64
}

// MaxErrorMessage bounds last_error_message so a huge broker error does not bloat rows.
const MaxErrorMessage = 1000

// New prepares the statements for table t.
func New(ctx context.Context, db *sql.DB, t pgident.Table) (*Store, error) {
	s := &Store{db: db, t: t}
	prep := func(dst **sql.Stmt, q string) error {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare statement on %s: %w", t, err)
		}
		*dst = st
		return nil
	}
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{
		{&s.sent, markSentSQL(t)},
		{&s.retry, markRetrySQL(t)},
		{&s.dead, markDeadSQL(t)},
		{&s.release, releaseSQL(t)},
		{&s.stats, statsSQL(t)},
	} {
		if err := prep(p.dst, p.q); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close releases the prepared statements.
func (s *Store) Close() {
	for _, st := range []*sql.Stmt{s.sent, s.retry, s.dead, s.release, s.stats} {
		if st != nil {
			_ = st.Close()
		}
	}
}

const nonTerminal = `('PENDING', 'SENDING', 'RETRY')`

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
func ClaimSQL(t pgident.Table) string { return claimSQL(t, "$1", "$2", "$3") }

// claimSQL builds the claim with its owner token, batch size and lease as SQL text
// (placeholders or literals).
func claimSQL(t pgident.Table, token, limit, lease string) string {
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
          AND p.status IN ` + nonTerminal + `
          AND (p.next_retry_at > now()
               OR (` + rank("p") + `, p.next_retry_at, p.created_at, p.ctid) > (` + rank("o") + `, o.next_retry_at, o.created_at, o.ctid))
        OFFSET 0)`
	scan := func(status, limit string) string {
		return `SELECT o.event_id, o.aggregate_type, o.aggregate_id, o.aggregate_version, o.status FROM ` + q + ` o
    WHERE o.status = '` + status + `' AND o.next_retry_at <= now() AND ` + free + `
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
), ok AS (
    SELECT c.event_id, c.status = 'SENDING' AS expired
    FROM cand c
    WHERE NOT EXISTS (SELECT 1 FROM ` + q + ` p
        WHERE p.aggregate_type = c.aggregate_type AND p.aggregate_id = c.aggregate_id
          AND p.aggregate_version < c.aggregate_version
          AND p.status IN ` + nonTerminal + `
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
func (s *Store) Claim(ctx context.Context, token string, n int, lease time.Duration) ([]Row, error) {
	s.Statements.Add(1)
	// Not a server-side prepared statement: after five executions PostgreSQL may switch
	// a prepared statement to a generic plan built without knowing the batch size and
	// from the statistics of a then-empty table (measured: 100 ms per claim instead of
	// 5 ms). Sent as one simple query (no bind parameters: the values are quoted
	// literals), it is planned with the real values every time, and the SET LOCAL before
	// it holds for exactly this claim: a simple query's statements are one transaction.
	//
	// Why the SET: with a small live backlog the planner prefers a bitmap scan of the
	// dispatch index plus a sort, and bitmap scans never mark the index entries of
	// claimed (now dead) row versions as dead. Those entries pile up until VACUUM and
	// every claim rereads them (measured at 5,000 events/s: 16,000 dead entries, 9 ms per
	// claim after 30 s, and growing). An ordered index scan stops at the batch size and
	// flags each dead entry the first time it passes it.
	q := `SET LOCAL enable_bitmapscan = off; ` +
		claimSQL(s.t, pq.QuoteLiteral(token), strconv.Itoa(n), pq.QuoteLiteral(interval(lease)))
	rows, err := s.db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	defer rows.Close()
	out := make([]Row, 0, n)
	for rows.Next() {
		var r Row
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

func markSentSQL(t pgident.Table) string {
	q := t.Qualified()
	return `UPDATE ` + q + ` t
SET status = 'SENT', sent_at = now(), updated_at = now(), lease_until = NULL,
    broker_partition = NULLIF(u.p, -1), broker_offset = NULLIF(u.o, -1),
    last_error_code = NULL, last_error_message = NULL
FROM unnest($2::text[], $3::int[], $4::bigint[]) AS u(id, p, o)
WHERE t.event_id = u.id AND t.owner_token = $1 AND t.status = 'SENDING'`
}

// MarkSent records successful publishes, fenced by owner token: rows taken over by
// another worker are left alone. It returns how many rows changed.
func (s *Store) MarkSent(ctx context.Context, token string, sent []Sent) (int64, error) {
	if len(sent) == 0 {
		return 0, nil
	}
	ids := make([]string, len(sent))
	parts := make([]int64, len(sent))
	offs := make([]int64, len(sent))
	for i, x := range sent {
		ids[i], parts[i], offs[i] = x.EventID, int64(x.Partition), x.Offset
	}
	s.Statements.Add(1)
	res, err := s.sent.ExecContext(ctx, token, pq.Array(ids), pq.Array(parts), pq.Array(offs))
	if err != nil {
		return 0, fmt.Errorf("mark sent: %w", err)
	}
	return res.RowsAffected()
}

// CodeMaxAttempts is stored when a row runs out of attempts; the last real error code
// is kept at the start of last_error_message.
const CodeMaxAttempts = "MAX_ATTEMPTS"

func markRetrySQL(t pgident.Table) string {
	q := t.Qualified()
	return `UPDATE ` + q + ` t
SET status = CASE WHEN NOT u.uncounted AND t.retry_count + 1 >= $2 THEN 'DEAD' ELSE 'RETRY' END,
    retry_count = t.retry_count + CASE WHEN u.uncounted THEN 0 ELSE 1 END,
    next_retry_at = now() + u.delay_ms * interval '1 millisecond',
    last_error_code = CASE WHEN NOT u.uncounted AND t.retry_count + 1 >= $2 THEN '` + CodeMaxAttempts + `' ELSE u.code END,
    last_error_message = CASE WHEN NOT u.uncounted AND t.retry_count + 1 >= $2 THEN u.code || ': ' || u.msg ELSE u.msg END,
    lease_until = NULL, updated_at = now()
FROM unnest($3::text[], $4::text[], $5::text[], $6::bigint[], $7::bool[]) AS u(id, code, msg, delay_ms, uncounted)
WHERE t.event_id = u.id AND t.owner_token = $1 AND t.status = 'SENDING'
RETURNING t.event_id, t.status`
}

// MarkRetry records failed attempts (fenced by owner token). A row whose attempts are
// used up (retry_count reaches maxAttempts) goes DEAD with code MAX_ATTEMPTS; an
// Uncounted failure never does and leaves retry_count alone. It
// returns the ids that went DEAD and the number of rows changed.
func (s *Store) MarkRetry(ctx context.Context, token string, maxAttempts int, fs []Failure) (dead []string, n int64, err error) {
	if len(fs) == 0 {
		return nil, 0, nil
	}
	ids, codes, msgs := split(fs)
	delays := make([]int64, len(fs))
	uncounted := make([]bool, len(fs))
	for i, f := range fs {
		delays[i] = f.Delay.Milliseconds()
		uncounted[i] = f.Uncounted
	}
	s.Statements.Add(1)
	rows, err := s.retry.QueryContext(ctx, token, maxAttempts, pq.Array(ids), pq.Array(codes), pq.Array(msgs), pq.Array(delays), pq.Array(uncounted))
	if err != nil {
		return nil, 0, fmt.Errorf("mark retry: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			return nil, 0, fmt.Errorf("mark retry: %w", err)
		}
		n++
		if st == "DEAD" {
			dead = append(dead, id)
		}
	}
	return dead, n, rows.Err()
}

func markDeadSQL(t pgident.Table) string {
	q := t.Qualified()
	return `UPDATE ` + q + ` t
SET status = 'DEAD', last_error_code = u.code, last_error_message = u.msg,
    retry_count = t.retry_count + 1, lease_until = NULL, updated_at = now()
FROM unnest($2::text[], $3::text[], $4::text[]) AS u(id, code, msg)
WHERE t.event_id = u.id AND t.owner_token = $1 AND t.status = 'SENDING'`
}

// MarkDead records permanent failures (fenced by owner token).
func (s *Store) MarkDead(ctx context.Context, token string, fs []Failure) (int64, error) {
	if len(fs) == 0 {
		return 0, nil
	}
	ids, codes, msgs := split(fs)
	s.Statements.Add(1)
	res, err := s.dead.ExecContext(ctx, token, pq.Array(ids), pq.Array(codes), pq.Array(msgs))
	if err != nil {
		return 0, fmt.Errorf("mark dead: %w", err)
	}
	return res.RowsAffected()
}

func releaseSQL(t pgident.Table) string {
	q := t.Qualified()
	return `UPDATE ` + q + ` t
SET status = CASE WHEN t.retry_count = 0 THEN 'PENDING' ELSE 'RETRY' END,
    owner_token = NULL, lease_until = NULL, next_retry_at = now(), updated_at = now()
WHERE t.event_id = ANY($2::text[]) AND t.owner_token = $1 AND t.status = 'SENDING'`
}

// Release hands unpublished claimed rows back (graceful shutdown, lease guard) so
// another worker can take them at once instead of waiting for the lease to expire.
func (s *Store) Release(ctx context.Context, token string, ids []string) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	s.Statements.Add(1)
	res, err := s.release.ExecContext(ctx, token, pq.Array(ids))
	if err != nil {
		return 0, fmt.Errorf("release leases: %w", err)
	}
	return res.RowsAffected()
}

func statsSQL(t pgident.Table) string {
	return `SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8
FROM ` + t.Qualified() + ` WHERE status IN ` + nonTerminal
}

// Backlog returns the number of non-terminal rows and the age of the oldest one
// (database clock), for the pending gauges.
func (s *Store) Backlog(ctx context.Context) (count int64, oldest time.Duration, err error) {
	var secs float64
	if err := s.stats.QueryRowContext(ctx).Scan(&count, &secs); err != nil {
		return 0, 0, fmt.Errorf("backlog: %w", err)
	}
	return count, time.Duration(secs * float64(time.Second)), nil
}

// TableHealth is what bloats a busy outbox table: dead tuples left by the status
// updates (until autovacuum), and its total size with indexes.
type TableHealth struct {
	DeadTuples, LiveTuples, SizeBytes int64
}

// Health reads the table's statistics (cheap catalog lookups, no table scan).
func (s *Store) Health(ctx context.Context) (TableHealth, error) {
	var h TableHealth
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(st.n_dead_tup, 0), COALESCE(st.n_live_tup, 0), pg_total_relation_size(c.oid)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_stat_user_tables st ON st.relid = c.oid
		WHERE n.nspname = $1 AND c.relname = $2`, s.t.Schema, s.t.Name).Scan(&h.DeadTuples, &h.LiveTuples, &h.SizeBytes)
	if err != nil {
		return h, fmt.Errorf("table health: %w", err)
	}
	return h, nil
}

// ErrHotStandby is returned by CheckPrimary on a server in recovery.
var ErrHotStandby = errors.New("database is a hot standby (pg_is_in_recovery() = true): the relay needs the primary")

// InRecovery reports pg_is_in_recovery().
func InRecovery(ctx context.Context, db *sql.DB) (bool, error) {
	var rec bool
	if err := db.QueryRowContext(ctx, `SELECT pg_is_in_recovery()`).Scan(&rec); err != nil {
		return false, fmt.Errorf("check pg_is_in_recovery(): %w", err)
	}
	return rec, nil
}

// PayloadType returns the SQL type of the payload column ("jsonb", "bytea", ...).
func PayloadType(ctx context.Context, db *sql.DB, t pgident.Table) (string, error) {
	var typ string
	err := db.QueryRowContext(ctx, `SELECT data_type FROM information_schema.columns
WHERE table_schema = $1 AND table_name = $2 AND column_name = 'payload'`, t.Schema, t.Name).Scan(&typ)
	if err != nil {
		return "", fmt.Errorf("payload column of %s: %w", t, err)
	}
	return typ, nil
}

func split(fs []Failure) (ids, codes, msgs []string) {
	ids = make([]string, len(fs))
	codes = make([]string, len(fs))
	msgs = make([]string, len(fs))
	for i, f := range fs {
		ids[i], codes[i] = f.EventID, f.Code
		m := f.Message
		if len(m) > MaxErrorMessage {
			m = strings.ToValidUTF8(m[:MaxErrorMessage], "")
		}
		msgs[i] = m
	}
	return
}
