// prepared.go: the statements of every turn (the tick's two and the advance),
// prepared. lib/pq sends a statement with parameters that is not prepared as two
// round trips (Parse and Describe, then Bind and Execute), and PostgreSQL parses and
// plans it each time; prepared, it is one round trip and a cached plan. A caught-up
// worker runs a tick and an advance per batch (about 110 a second per worker at
// 1,000 events/s), so the round trips were a part of every event's latency.

package shardstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// prepared returns q prepared on the pool. database/sql prepares it again on each
// pooled connection it runs on (and on a transaction's: Tx.StmtContext), so one
// *sql.Stmt per statement serves the whole pool, across reconnects.
func (s *Store) prepared(ctx context.Context, q string) (*sql.Stmt, error) {
	s.stmtsMu.Lock()
	defer s.stmtsMu.Unlock()
	if st := s.stmts[q]; st != nil {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if s.stmts == nil {
		s.stmts = map[string]*sql.Stmt{}
	}
	s.stmts[q] = st
	return st, nil
}

// closePrepared closes the prepared statements (on every connection they were
// prepared on).
func (s *Store) closePrepared() error {
	s.stmtsMu.Lock()
	defer s.stmtsMu.Unlock()
	var errs []error
	for _, st := range s.stmts {
		errs = append(errs, st.Close())
	}
	s.stmts = nil
	return errors.Join(errs...)
}
