// drain_writes.go: what a drain wrote, per event: the peer table's n_tup_upd +
// n_tup_del (pg_stat_user_tables) and the cluster's WAL (pg_current_wal_lsn
// difference); and the relay's PostgreSQL CPU per event against the producers' own
// one-row INSERT on the same table contract (the gate's producerCost).

package main

import (
	"database/sql"
	"fmt"
)

// tabled is a peer that names its outbox table (as pg_stat_user_tables does).
type tabled interface{ statsTable() string }

func (p *relayPeer) statsTable() string     { return "outbox_event" }
func (p *watermillPeer) statsTable() string { return "watermill_" + wmTopic }

// tableMeter holds the start of a drain's writes.
type tableMeter struct {
	s      *stack
	db     *sql.DB
	table  string
	wal0   int64
	updDel int64
}

// startTableMeter reads the WAL position and the peer table's writes so far (-1 in
// updDel for a peer that names no table).
func (s *stack) startTableMeter(db *sql.DB, p peer) (*tableMeter, error) {
	m := &tableMeter{s: s, db: db}
	if t, ok := p.(tabled); ok {
		m.table = t.statsTable()
		var err error
		if m.updDel, _, err = tableWrites(db, m.table); err != nil {
			return nil, fmt.Errorf("writes of %s: %w", m.table, err)
		}
	}
	var err error
	m.wal0, err = s.walBytes()
	return m, err
}

func (m *tableMeter) walSince() (int64, error) {
	w, err := m.s.walBytes()
	return w - m.wal0, err
}

// writesSince is the table's n_tup_upd + n_tup_del since the start; call it after
// the workers' connections closed (their statistics are flushed when they exit).
func (m *tableMeter) writesSince() (int64, error) {
	if m.table == "" {
		return -1, nil
	}
	u, _, err := tableWrites(m.db, m.table)
	if err != nil {
		return 0, fmt.Errorf("writes of %s: %w", m.table, err)
	}
	return u - m.updDel, nil
}

func (r drainResult) walPerEvent() float64    { return float64(r.wal) / float64(r.events) }
func (r drainResult) updDelPerEvent() float64 { return float64(r.updDel) / float64(r.events) }

// insertCosts measures the producers' own INSERT per row on the tables of the
// relay peers in ps (8 producers, one-row transactions, -producer-rows rows into an
// empty table), keyed by peer name.
func (s *stack) insertCosts(ps []peer) (map[string]cost, error) {
	out := map[string]cost{}
	for i, p := range ps {
		c, err := s.producerCost(p.name(), fmt.Sprintf("ins-%d", i), func(super string, _ *sql.DB) error { return p.setup(super) },
			p.insertSQL(), *producerCount, 8)
		if err != nil {
			return nil, fmt.Errorf("producers' INSERT on %s's table: %w", p.name(), err)
		}
		out[p.name()] = c
	}
	return out, nil
}
