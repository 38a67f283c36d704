package outboxstats

// Pools: the operator's connections to the pipelines' databases. Many pipelines on one
// database share one bounded pool, so the operator's idle connections never grow with
// the number of pipelines and never take the slots the applications need
// (docs/architecture.md, "Operator").

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lib/pq"
)

// DefaultMaxConns is the default bound on the operator's connections to one database.
const DefaultMaxConns = 3

// ApplicationName is the application_name of every operator connection, so a DBA can
// tell them apart in pg_stat_activity. It replaces one in the DSN: that DSN is the
// relay workers', and the operator's connections are not theirs.
const ApplicationName = "outbox-operator"

// ErrDatabaseBusy is returned (wrapped) by Read when the database's read slots
// stayed taken for Timeout: the reads ahead are waiting on a slow database.
var ErrDatabaseBusy = errors.New("database busy")

// ErrUnusableDSN is returned (wrapped) by Get and Read for a DSN no pool can be
// opened with; the text never quotes the DSN.
var ErrUnusableDSN = errors.New("the DSN in the Secret cannot be used")

// Pools shares one *sql.DB per database among its users (pipelines, and replays of a
// consumer database). A user is a key, its database the DSN it last asked with: a new
// DSN (a rotated password) moves the key to the pool of the new DSN, and a pool no key
// uses any more is closed. DSNs are only held in memory, keyed by their hash.
type Pools struct {
	mu       sync.Mutex
	maxConns int
	// failFastFor is how long the reads of an unresponsive database fail at once
	// (failfast.go).
	failFastFor time.Duration
	users       map[string]string // key -> dsnKey
	dbs         map[string]*sharedDB
}

// sharedDB is one database's pool; reads holds a token per status read in flight.
type sharedDB struct {
	db    *sql.DB
	reads chan struct{}
	users int

	mu sync.Mutex
	// unresponsiveUntil: reads fail at once before then (failfast.go).
	unresponsiveUntil time.Time
}

// NewPools returns an empty Pools with DefaultMaxConns connections per database.
func NewPools() *Pools { return NewPoolsMax(DefaultMaxConns) }

// NewPoolsMax returns an empty Pools with at most maxConns (at least 1) connections
// per database. Status reads take at most max(1, maxConns-1) of them at a time, so
// one stays free for the slot management of LogicalReplication pipelines.
func NewPoolsMax(maxConns int) *Pools {
	return &Pools{maxConns: max(maxConns, 1), failFastFor: DefaultFailFastFor, users: map[string]string{}, dbs: map[string]*sharedDB{}}
}

// MaxReads is how many status reads run against one database at a time.
func (p *Pools) MaxReads() int { return max(p.maxConns-1, 1) }

// Get returns the pool of dsn's database for key, opening it when no key uses it yet.
// A key that asked with another DSN before leaves that pool, which closes when it was
// the last user.
func (p *Pools) Get(key, dsn string) (*sql.DB, error) {
	sdb, err := p.get(key, dsn)
	if err != nil {
		return nil, err
	}
	return sdb.db, nil
}

// takeSlot waits (at most Timeout) for one of the database's read slots; release
// gives it back. Reads queue here, before their own Timeout starts, so a burst of
// pipelines on one database waits its turn instead of timing out.
func (p *Pools) takeSlot(ctx context.Context, sdb *sharedDB) (release func(), err error) {
	t := time.NewTimer(Timeout)
	defer t.Stop()
	select {
	case sdb.reads <- struct{}{}:
		return func() { <-sdb.reads }, nil
	case <-t.C:
		return nil, fmt.Errorf("%w: %d reads on it did not finish within %s", ErrDatabaseBusy, cap(sdb.reads), Timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *Pools) get(key, dsn string) (*sharedDB, error) {
	h := dsnKey(dsn)
	p.mu.Lock()
	sdb, unused, err := p.join(key, h, dsn)
	p.mu.Unlock()
	closeUnused(unused)
	return sdb, err
}

// join makes key a user of the pool of h, opening it if needed; unused is the pool key
// left and nobody uses any more, for the caller to close. p.mu is held.
func (p *Pools) join(key, h, dsn string) (sdb *sharedDB, unused *sql.DB, err error) {
	if cur, ok := p.users[key]; ok {
		if cur == h {
			return p.dbs[h], nil, nil
		}
		unused = p.leave(key)
	}
	sdb, ok := p.dbs[h]
	if !ok {
		db, err := p.open(dsn)
		if err != nil {
			return nil, unused, err
		}
		sdb = &sharedDB{db: db, reads: make(chan struct{}, p.MaxReads())}
		p.dbs[h] = sdb
	}
	sdb.users++
	p.users[key] = h
	return sdb, unused, nil
}

func (p *Pools) open(dsn string) (*sql.DB, error) {
	cfg, err := pq.NewConfig(dsn)
	if err != nil {
		// lib/pq parse errors can quote parts of the DSN: keep them out of messages.
		return nil, fmt.Errorf("%w: it cannot be parsed", ErrUnusableDSN)
	}
	cfg.ApplicationName = ApplicationName
	conn, err := pq.NewConnectorConfig(cfg)
	if err != nil {
		return nil, ErrUnusableDSN
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(p.maxConns)
	db.SetMaxIdleConns(p.maxConns)
	// Every pipeline on the database reads it once per statusInterval, so a connection
	// idle for a minute belongs to a database nobody reads often.
	db.SetConnMaxIdleTime(time.Minute)
	db.SetConnMaxLifetime(10 * time.Minute)
	return db, nil
}

// leave drops key from its pool and returns the pool if nobody else uses it, for the
// caller to close once p.mu is released: Close waits for the queries in flight, and
// other reconcilers must not wait for them. p.mu is held.
func (p *Pools) leave(key string) (unused *sql.DB) {
	h, ok := p.users[key]
	if !ok {
		return nil
	}
	delete(p.users, key)
	sdb := p.dbs[h]
	if sdb.users--; sdb.users > 0 {
		return nil
	}
	delete(p.dbs, h)
	return sdb.db
}

func closeUnused(db *sql.DB) {
	if db != nil {
		contracts.forgetDB(db)
		_ = db.Close()
	}
}

// Existing returns the pool key used last, or nil.
func (p *Pools) Existing(key string) *sql.DB {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h, ok := p.users[key]; ok {
		return p.dbs[h].db
	}
	return nil
}

// Forget drops key; its pool closes when no other key uses it.
func (p *Pools) Forget(key string) {
	p.mu.Lock()
	unused := p.leave(key)
	p.mu.Unlock()
	closeUnused(unused)
}

// Databases is the number of open pools (one per database DSN in use).
func (p *Pools) Databases() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.dbs)
}

// Close closes every pool.
func (p *Pools) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for h, sdb := range p.dbs {
		contracts.forgetDB(sdb.db)
		_ = sdb.db.Close()
		delete(p.dbs, h)
	}
	clear(p.users)
}

// dsnKey names a DSN's pool: the whole SHA-256, so two DSNs never share a pool by
// accident, and the DSN itself is never a map key anyone could print.
func dsnKey(dsn string) string {
	sum := sha256.Sum256([]byte(dsn))
	return hex.EncodeToString(sum[:])
}
