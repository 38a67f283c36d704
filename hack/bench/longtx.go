// longtx.go: -runs latency-longtx, issue 21's "p99 at 1k ev/s with a 10-minute open
// write transaction elsewhere in the cluster": for relay and relay-v2, the latency
// run at -longtx-rate without, then with, a transaction open in another database of
// the same PostgreSQL cluster. It has written a row (so it holds a transaction id and
// keeps every snapshot's xmin at or below it) and stays open from before the workers
// start until after the last measured event was read; then it is rolled back. The
// run checks (pg_stat_activity) that it was open through all of it. Its length is
// -longtx-open (the ten minutes by default): the producers run unmeasured for
// all of it but the last -duration, so the measured part sees everything the open
// transaction kept from being pruned. The run without takes the same time, so both
// tables are as large.

package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"time"
)

var (
	longTxRate = flag.Int("longtx-rate", 1000, "producer rate of -runs latency-longtx (events/s)")
	longTxOpen = flag.Duration("longtx-open", 10*time.Minute, "how long -runs latency-longtx keeps its transaction open: "+
		"the producers run unmeasured for all of it but the last -duration")
)

// longTxWarmup is the unmeasured start of each latency-longtx run: the open
// transaction's time but the measured part, and at least -warmup.
func longTxWarmup() time.Duration { return max(*longTxOpen-*duration, *warmup) }

func latencyLongTx(s *stack) error {
	if *longTxRate <= 0 {
		return fmt.Errorf("-longtx-rate %d: want a positive rate", *longTxRate)
	}
	fmt.Printf("latency with an open write transaction elsewhere in the cluster: as the latency run (8 producers, plain INSERT,\n"+
		"%s warm-up then %s, %d ev/s), without, then with a transaction that wrote a row in another database of the same\n"+
		"PostgreSQL cluster, opened before the workers start and rolled back after the run (-longtx-open); load avg %s\n",
		longTxWarmup(), *duration, *longTxRate, loadAvg())
	printLatencyHeader()
	var ps []peer
	if has(*peers, "relay") {
		ps = append(ps, s.relay("relay", nil, false))
	}
	if has(*peers, "relay-v2") {
		ps = append(ps, s.relayV2("relay v2", nil, false))
	}
	for i, p := range ps {
		without, err := s.latency(p, fmt.Sprintf("lt%d-without", i), *longTxRate, *workers, longTxWarmup(), *duration, false)
		if err != nil {
			return fmt.Errorf("latency %s: %w", p.name(), err)
		}
		printLatency(without, "-")
		with, open, err := s.latencyWithOpenTx(p, fmt.Sprintf("lt%d-with", i))
		if err != nil {
			return fmt.Errorf("latency %s with an open write transaction: %w", p.name(), err)
		}
		with.peer = p.name() + ", open write tx"
		printLatency(with, "-")
		fmt.Printf("    %s: p99 with / without %.2f x (target for v2 <= 1.2 x); p50 %.2f x; the transaction was open %.0f s\n",
			p.name(), ms(with.p99)/ms(without.p99), ms(with.p50)/ms(without.p50), open.Seconds())
	}
	fmt.Printf("  load avg at the end: %s\n\n", loadAvg())
	return nil
}

// latencyWithOpenTx runs the latency run with an open write transaction in another
// database and reports how long the transaction was open.
func (s *stack) latencyWithOpenTx(p peer, tag string) (latResult, time.Duration, error) {
	tx, err := s.openWriteTx(tag + "-elsewhere")
	if err != nil {
		return latResult{}, 0, err
	}
	defer tx.close()
	r, err := s.latency(p, tag, *longTxRate, *workers, longTxWarmup(), *duration, false)
	if err != nil {
		return r, 0, err
	}
	open, err := tx.checkOpen()
	if err != nil {
		return r, 0, err
	}
	return r, open, tx.rollback()
}

// openTx is a write transaction held open on a connection of its own.
type openTx struct {
	s     *stack
	dsn   string
	db    *sql.DB
	conn  *sql.Conn
	pid   int
	xid   string
	begun time.Time
	done  bool
}

// openWriteTx creates a database, a table in it, and leaves a transaction open
// that inserted a row.
func (s *stack) openWriteTx(name string) (*openTx, error) {
	ctx := context.Background()
	super, _, db, err := s.newDatabase(name)
	if err != nil {
		return nil, err
	}
	t := &openTx{s: s, dsn: super, db: db}
	if _, err := db.ExecContext(ctx, `CREATE TABLE elsewhere (id bigint PRIMARY KEY, note text)`); err != nil {
		t.close()
		return nil, fmt.Errorf("open write transaction: %w", err)
	}
	if t.conn, err = db.Conn(ctx); err != nil {
		t.close()
		return nil, err
	}
	for _, q := range []string{`BEGIN`, `INSERT INTO elsewhere VALUES (1, 'open through the run')`} {
		if _, err := t.conn.ExecContext(ctx, q); err != nil {
			t.close()
			return nil, fmt.Errorf("open write transaction: %s: %w", q, err)
		}
	}
	err = t.conn.QueryRowContext(ctx, `SELECT pg_backend_pid(), pg_current_xact_id_if_assigned()::text`).Scan(&t.pid, &t.xid)
	if err != nil {
		t.close()
		return nil, fmt.Errorf("open write transaction: its id: %w", err)
	}
	t.begun = time.Now()
	return t, nil
}

// checkOpen confirms the transaction is still open with its id (idle in
// transaction, backend_xid set) and reports for how long.
func (t *openTx) checkOpen() (time.Duration, error) {
	var state, xid string
	err := t.s.admin.QueryRow(`SELECT state, COALESCE(backend_xid::text, '') FROM pg_stat_activity WHERE pid = $1`, t.pid).Scan(&state, &xid)
	if err != nil {
		return 0, fmt.Errorf("open write transaction: pg_stat_activity: %w", err)
	}
	if state != "idle in transaction" || xid == "" {
		return 0, fmt.Errorf("open write transaction (xid %s) was not open at the end of the run: state %q, backend_xid %q", t.xid, state, xid)
	}
	return time.Since(t.begun), nil
}

func (t *openTx) rollback() error {
	_, err := t.conn.ExecContext(context.Background(), `ROLLBACK`)
	t.done = err == nil
	if err != nil {
		return fmt.Errorf("open write transaction: rollback: %w", err)
	}
	return nil
}

// close rolls back (if still open), closes the connection and drops the database.
func (t *openTx) close() {
	if t.conn != nil {
		if !t.done {
			_, _ = t.conn.ExecContext(context.Background(), `ROLLBACK`)
		}
		_ = t.conn.Close()
	}
	_ = t.db.Close()
	t.s.dropDatabase(t.dsn)
}
