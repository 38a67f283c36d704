package outboxstats

// Which statements Read runs depends on the table's contract (v1: status columns on
// the row; v2: shard windows and side tables, docs/contract-v2.md). Detecting it is
// one catalog query, so it is done once per pool and table and cached: an idle pass
// costs the same round trips as before. A table changes contract only by being
// dropped and created again (or, later, by the v1 -> v2 upgrade), and then the cached
// contract's statements fail on a column or table that is not there: Read drops the
// entry and reads again, detecting afresh.

import (
	"database/sql"
	"sync"
	"sync/atomic"

	"github.com/outbox-operator/outbox-operator/internal/pgerr"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

type contractKey struct {
	db    *sql.DB
	table string
}

// contractCache maps a pool and a table to the table's contract. Entries of a pool
// go when Pools closes it (forgetDB), so a closed pool is not kept alive by it.
type contractCache struct {
	mu sync.Mutex
	m  map[contractKey]schema.Contract
}

var contracts = &contractCache{m: map[contractKey]schema.Contract{}}

func (c *contractCache) get(db *sql.DB, t pgident.Table) (schema.Contract, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[contractKey{db, t.String()}]
	return v, ok
}

func (c *contractCache) put(db *sql.DB, t pgident.Table, v schema.Contract) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[contractKey{db, t.String()}] = v
}

func (c *contractCache) drop(db *sql.DB, t pgident.Table) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, contractKey{db, t.String()})
}

// forgetDB drops every entry of a pool that is being closed.
func (c *contractCache) forgetDB(db *sql.DB) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if k.db == db {
			delete(c.m, k)
		}
	}
}

// detections counts contract detections (a test shows an idle pass does none).
var detections atomic.Int64

// contractChanged: the error a cached contract's statements give when the table now
// follows another one (or is gone): a column or table they name does not exist.
func contractChanged(err error) bool {
	return pgerr.IsUndefinedTable(err) || pgerr.Is(err, pgerr.UndefinedColumn)
}
