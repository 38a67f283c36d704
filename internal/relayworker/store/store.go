// Package store holds every SQL statement the relay runs against the outbox table:
// the batched claim (claim.go), the owner-fenced marks and lease release (marks.go),
// the worker-status table (workers.go), the cheap backlog gauges and the hot-standby
// check. Table names only ever come from a validated pgident.Table; lease arithmetic
// only ever uses the database clock (now()). Each statement, as it is sent, is also
// in testdata/<name>.sql (sql_test.go; rewritten with go test -update), so a change
// to one reviews as an SQL diff.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// Options configure a Store.
type Options struct {
	// Table is the outbox table; its side tables (<table>_workers) follow from it.
	Table pgident.Table
	// HandoverAfter > 0: Claim takes PENDING rows only this long after their insert
	// time (logical-replication mode, --cdc-handover-after; ClaimIDs takes the new ones).
	HandoverAfter time.Duration
}

// Store runs the relay's statements. It is safe for concurrent use.
type Store struct {
	db            *sql.DB
	t             pgident.Table
	handoverAfter time.Duration

	sent, retry, dead, release, stats *sql.Stmt

	// Statements counts statements sent to PostgreSQL (benchmarks report it per event).
	Statements atomic.Int64
}

// New prepares the statements for o.Table.
func New(ctx context.Context, db *sql.DB, o Options) (*Store, error) {
	t := o.Table
	s := &Store{db: db, t: t, handoverAfter: o.HandoverAfter}
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

func statsSQL(t pgident.Table) string {
	return `SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8
FROM ` + t.Qualified() + ` WHERE status IN ` + schema.NonTerminalIn
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

// Waiting reports whether any row waits to be sent now: PENDING, SENDING (in flight
// at some worker) or RETRY whose backoff has passed. RETRY rows still backing off do
// not count. A paused relay whose trial claim found nothing asks it before resuming
// (relay/claim.go).
func (s *Store) Waiting(ctx context.Context) (bool, error) {
	var waiting bool
	s.Statements.Add(1)
	if err := s.db.QueryRowContext(ctx, waitingSQL(s.t)).Scan(&waiting); err != nil {
		return false, fmt.Errorf("waiting rows: %w", err)
	}
	return waiting, nil
}

func waitingSQL(t pgident.Table) string {
	return `SELECT EXISTS (SELECT 1 FROM ` + t.Qualified() + ` WHERE status IN ` + schema.NonTerminalIn + `
    AND (status <> 'RETRY' OR next_retry_at <= now()))`
}

// TableHealth is what bloats a busy outbox table: dead tuples left by the status
// updates (until autovacuum), and its total size with indexes.
type TableHealth struct {
	DeadTuples, LiveTuples, SizeBytes int64
}

// Health reads the table's statistics (cheap catalog lookups, no table scan).
func (s *Store) Health(ctx context.Context) (TableHealth, error) {
	return ReadTableHealth(ctx, s.db, s.t)
}

// ReadTableHealth reads t's statistics: Store.Health for any outbox table (the v2
// relay's too).
func ReadTableHealth(ctx context.Context, db *sql.DB, t pgident.Table) (TableHealth, error) {
	var h TableHealth
	err := db.QueryRowContext(ctx, `SELECT COALESCE(st.n_dead_tup, 0), COALESCE(st.n_live_tup, 0), pg_total_relation_size(c.oid)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_stat_user_tables st ON st.relid = c.oid
		WHERE n.nspname = $1 AND c.relname = $2`, t.Schema, t.Name).Scan(&h.DeadTuples, &h.LiveTuples, &h.SizeBytes)
	if err != nil {
		return h, fmt.Errorf("table health: %w", err)
	}
	return h, nil
}

// ErrHotStandby is returned by CheckPrimary when the server is in recovery: claims,
// marks and DDL need the primary.
var ErrHotStandby = errors.New("database is a hot standby (pg_is_in_recovery() = true): the relay needs the primary")

// CheckPrimary returns ErrHotStandby when db is a hot standby (pg_is_in_recovery()),
// or the error of asking; nil on a primary. The worker checks once at start, so a
// standby DSN fails with one clear line instead of with a read-only error per claim.
func CheckPrimary(ctx context.Context, db *sql.DB) error {
	rec, err := InRecovery(ctx, db)
	if err != nil {
		return err
	}
	if rec {
		return ErrHotStandby
	}
	return nil
}

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
