// Package shardstore holds every SQL statement the v2 relay runs against a table of
// contract v2 (docs/contract-v2.md): the tick (tick.go), the shard leases
// (lease.go), the window read (read.go), the fenced advance that writes the batch log
// and the hold rows (advance.go), and the hold table's due read and settle (hold.go).
// It is v1's store for the insert-only table: the relay never updates or deletes an
// outbox row; its whole state is in the side tables, and every write to them is
// fenced by a lease token.
//
// The decisions (fair share, which shards to take and give up, which events go to
// the hold table and what a hold row becomes) are pure functions (share.go,
// holdplan.go, windows.go). Table names only ever come from a validated
// pgident.Table; time only ever from the database clock. Each statement, as sent, is
// in testdata/<name>.sql (sql_test.go).
package shardstore

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// Options configure a Store.
type Options struct {
	// Table is a v2 outbox table (schema.VerifyV2 accepted it).
	Table pgident.Table
	// Shards is the table's shard count (schema.Contract.Shards).
	Shards int
	// WorkerID names this worker in the workers table and the batch log (the pod name).
	WorkerID string
	// Lease is how long an acquired or renewed shard lease lasts, and how recent a
	// worker's heartbeat must be for it to count as live; 0 means contract.DefaultLease.
	Lease time.Duration
}

// Store runs the v2 statements for one worker. Read uses a connection of its own
// (the planner settings it needs are per connection); the rest use the pool. It is
// safe for concurrent use, but the windows and hold rows of a shard must be driven by
// one loop: read, publish and advance of a shard do not overlap, and Rebalance runs
// between batches.
type Store struct {
	db       *sql.DB
	t        pgident.Table
	shards   int
	workerID string
	lease    time.Duration

	mu   sync.Mutex // guards the read connection
	conn *sql.Conn
	read *sql.Stmt

	stmtsMu sync.Mutex           // guards stmts
	stmts   map[string]*sql.Stmt // by SQL text (prepared.go)

	// housekept is the newest tick at this worker's last housekeeping (Tick), and
	// housekeptAt its time (monotonic, since started); housekeepEvery is the least
	// time between two (HousekeepEvery; tests set less).
	housekept      atomic.Int64
	housekeptAt    atomic.Int64
	housekeepEvery time.Duration
	started        time.Time

	// The trims run beside the loop (Tick, startTrim): one round at a time (trimming),
	// waited for by Close; a failure is returned by the next Tick. trims is touched by
	// that round only.
	background sync.WaitGroup
	trimming   atomic.Bool
	trimFailed atomic.Pointer[error]
	trims      trimFloors
}

// New checks the options; it does not touch the database.
func New(db *sql.DB, o Options) (*Store, error) {
	if err := schema.ValidShards(o.Shards); err != nil {
		return nil, fmt.Errorf("shard store for %s: %w", o.Table, err)
	}
	if o.WorkerID == "" {
		return nil, errors.New("shard store: empty worker id")
	}
	if o.Lease == 0 {
		o.Lease = contract.DefaultLease
	}
	if o.Lease < time.Second {
		return nil, fmt.Errorf("shard store: lease %s is shorter than a second", o.Lease)
	}
	return &Store{db: db, t: o.Table, shards: o.Shards, workerID: o.WorkerID, lease: o.Lease,
		housekeepEvery: HousekeepEvery, started: time.Now()}, nil
}

// Close releases the read connection and the prepared statements (the pool is the
// caller's).
func (s *Store) Close() error {
	s.background.Wait()
	s.mu.Lock()
	err := s.dropReadConn()
	s.mu.Unlock()
	return errors.Join(err, s.closePrepared())
}

// interval is the lease as a PostgreSQL interval parameter.
func (s *Store) interval() string { return fmt.Sprintf("%d milliseconds", s.lease.Milliseconds()) }

// newToken is a fresh lease token: the worker id and 64 random bits, so a stalled
// process holding an old token can never match a lease taken again since.
func (s *Store) newToken() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("lease token: %w", err)
	}
	return s.workerID + "/" + hex.EncodeToString(b[:]), nil
}

// side names a side table of the store's outbox table, quoted.
func side(t pgident.Table, suffix string) string { return t.WithSuffix(suffix).Qualified() }
