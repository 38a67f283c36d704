// gate.go: issue 21's gate, in `-runs limits`: the v2 hot path's statements alone
// (read + fenced advance, no broker) against v1's claim + mark SENT on the same
// server in the same run, on pre-loaded tables of each -gate-events size, and what
// the producers' own INSERTs cost per row on either table. Measured per event:
// PostgreSQL CPU (from /proc of the postgres processes, cpu.go), WAL (the
// pg_current_wal_lsn difference) and the outbox table's n_tup_upd + n_tup_del.

package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"
)

// cost is what one measured phase took.
type cost struct {
	what    string
	n       int
	secs    float64
	cpu     cpuSample
	wal     int64
	updDel  int64 // n_tup_upd + n_tup_del of the outbox table
	hotUpd  int64
	loadCPU float64 // the bulk load (COPY) before it: PostgreSQL CPU seconds
	loadWAL int64
}

func (c cost) rate() float64        { return float64(c.n) / c.secs }
func (c cost) cpuPerEvent() float64 { return 1e6 * c.cpu["postgres"] / float64(c.n) }
func (c cost) walPerEvent() float64 { return float64(c.wal) / float64(c.n) }

// meter samples CPU and WAL at the start of a phase.
type meter struct {
	s   *stack
	cpu cpuSample
	wal int64
	t0  time.Time
}

func (s *stack) walBytes() (int64, error) {
	var b int64
	err := s.admin.QueryRow(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&b)
	return b, err
}

func (s *stack) startMeter() (meter, error) {
	m := meter{s: s, cpu: s.sampleCPU(nil)}
	var err error
	m.wal, err = s.walBytes()
	m.t0 = time.Now()
	return m, err
}

// stop fills c's time, CPU and WAL since the start.
func (m meter) stop(c *cost) error {
	c.secs = time.Since(m.t0).Seconds()
	c.cpu = m.s.sampleCPU(nil).since(m.cpu)
	w, err := m.s.walBytes()
	c.wal = w - m.wal
	return err
}

// tableWrites reads n_tup_upd + n_tup_del and n_tup_hot_upd of table. Backends
// flush their statistics when they exit, so callers close the workers' connections
// first (flushed stats are visible after at most a second).
func tableWrites(db *sql.DB, table string) (updDel, hot int64, err error) {
	time.Sleep(1500 * time.Millisecond)
	err = db.QueryRow(`SELECT n_tup_upd + n_tup_del, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = $1`, table).Scan(&updDel, &hot)
	return updDel, hot, err
}

// v2Alone drains n pre-loaded events from the v2 table with `loops` readers (each
// on its own connection, owning shard % loops), batches of 500.
func (s *stack) v2Alone(tag string, n, loops int) (cost, error) {
	res := cost{what: fmt.Sprintf("v2 read + fenced advance (%d shards)", gateShards), n: n}
	w := newWorkload(tag, n, aggregates, 42)
	_, dsn, db, err := s.newDatabase(tag)
	if err != nil {
		return res, err
	}
	defer s.dropDatabase(dsn)
	defer db.Close()
	if err := gateSetup(db); err != nil {
		return res, err
	}
	load := func() error {
		if err := loadV2(db, w); err != nil {
			return err
		}
		return gateTick(context.Background(), db)
	}
	var got *gateSeen
	drain := func(done func()) (err error) {
		got, err = gateDrain(dsn, db, loops, 500, *verbose, done)
		return err
	}
	if err := s.measureAlone(&res, db, "outbox_v2", load, drain); err != nil {
		return res, err
	}
	return res, got.check(n)
}

// measureAlone measures load (the bulk load, into c's load fields), runs VACUUM
// ANALYZE + CHECKPOINT, then measures drain into c, with table's n_tup_upd +
// n_tup_del. drain calls done when its workers finished, before their connections
// close (an exited backend takes its CPU time out of /proc).
func (s *stack) measureAlone(c *cost, db *sql.DB, table string, load func() error, drain func(done func()) error) error {
	lm, err := s.startMeter()
	if err != nil {
		return err
	}
	if err := load(); err != nil {
		return err
	}
	var l cost
	if err := lm.stop(&l); err != nil {
		return err
	}
	c.loadCPU, c.loadWAL = l.cpu["postgres"], l.wal
	if err := prepareTable(db); err != nil {
		return err
	}
	u0, h0, err := tableWrites(db, table)
	if err != nil {
		return err
	}
	m, err := s.startMeter()
	if err != nil {
		return err
	}
	var merr error
	if err := drain(func() { merr = m.stop(c) }); err != nil {
		return err
	}
	if merr != nil {
		return merr
	}
	u1, h1, err := tableWrites(db, table)
	c.updDel, c.hotUpd = u1-u0, h1-h0
	return err
}

// dropDatabase drops a measured run's database, so its autovacuum does not run
// into the next measurement.
func (s *stack) dropDatabase(dsn string) {
	_, _ = s.admin.Exec(`DROP DATABASE IF EXISTS ` + quoteIdent(dbName(dsn)) + ` WITH (FORCE)`)
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// gateSetup creates the v2 tables, the first tick and the shards (every window
// starting at it).
func gateSetup(db *sql.DB) error {
	for _, q := range gateDDL() {
		if _, err := db.Exec(q); err != nil {
			return fmt.Errorf("v2 DDL: %w (%.60s)", err, q)
		}
	}
	if err := gateTick(context.Background(), db); err != nil {
		return err
	}
	_, err := db.Exec(gateShardsSQL, 1)
	return err
}

// loadV2 COPYs w's events into the v2 table as the drain loads v1's (the same
// producer columns; txid, seq and shard come from the table's defaults).
func loadV2(db *sql.DB, w *workload) error {
	p := &relayPeer{}
	return copyChunks(db, w, "outbox_v2", []string{"event_id", "aggregate_type", "aggregate_id",
		"aggregate_version", "event_type", "destination", "message_key", "payload", "headers"},
		func(*sql.Tx) (func(event) []any, error) { return func(e event) []any { return p.args(w, e) }, nil })
}

// gateSeen collects what the readers read: every seq once, and per shard in
// ascending seq order (a drain of pre-loaded rows reads one window per shard).
type gateSeen struct {
	mu       sync.Mutex
	seqs     map[int64]bool
	lastSeq  map[int16]int64
	dups     int
	reorders int
}

func (g *gateSeen) add(r gateRow) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seqs[r.seq] {
		g.dups++
	}
	g.seqs[r.seq] = true
	if r.seq < g.lastSeq[r.shard] {
		g.reorders++
	}
	g.lastSeq[r.shard] = r.seq
}

func (g *gateSeen) check(n int) error {
	if len(g.seqs) != n || g.dups != 0 || g.reorders != 0 {
		return fmt.Errorf("v2 drain read %d distinct of %d events, %d twice, %d out of seq order", len(g.seqs), n, g.dups, g.reorders)
	}
	return nil
}

// gateDrain leases the shards to `loops` readers and drains them, each reader on
// a connection of its own pool, closed at the end so its statistics are flushed;
// with explain, the first reader's first read is explained first. done runs when
// the readers finished, before their connections close: a backend that exited
// takes its CPU time out of /proc.
func gateDrain(dsn string, db *sql.DB, loops, batch int, explain bool, done func()) (*gateSeen, error) {
	ctx := context.Background()
	seen := &gateSeen{seqs: map[int64]bool{}, lastSeq: map[int16]int64{}}
	toks, err := gateLease(ctx, db, loops)
	if err != nil {
		return nil, err
	}
	if explain {
		if err := gateExplain(db, toks[0]); err != nil {
			return nil, err
		}
	}
	pool, err := sql.Open("postgres", dsn)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	errs := make(chan error, loops)
	var wg sync.WaitGroup
	for _, tok := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- gateLoop(ctx, pool, tok, batch, seen.add)
		}()
	}
	wg.Wait()
	done()
	close(errs)
	for err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return seen, nil
}

func gateLoop(ctx context.Context, pool *sql.DB, tok string, batch int, seen func(gateRow)) error {
	conn, err := pool.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	r, err := newGateReader(ctx, conn, tok, batch)
	if err != nil {
		return err
	}
	return r.drain(ctx, seen)
}

// gateExplain prints EXPLAIN (ANALYZE, BUFFERS) of the read as a reader runs it
// (generic plan, the reader's settings) for token tok's first batch. The read
// changes nothing, so analysing it leaves the drain as it was.
func gateExplain(db *sql.DB, tok string) error {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, q := range append(gateReadSettings, `PREPARE gate_read(text, int, int) AS `+gateReadSQL) {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("explain: %w", err)
		}
	}
	defer conn.ExecContext(ctx, `DEALLOCATE gate_read`) //nolint:errcheck // the connection is closed next
	rows, err := conn.QueryContext(ctx, `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE gate_read(`+quoteLit(tok)+`, 500, 0)`)
	if err != nil {
		return fmt.Errorf("explain: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err
		}
		fmt.Println("      " + line)
	}
	return rows.Err()
}

func quoteLit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
