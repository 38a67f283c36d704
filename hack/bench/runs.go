// runs.go: the measured runs. drain: a bulk-loaded backlog relayed by worker
// processes until every row is settled and every event was read by the consumer.
// latency: producers committing one event per transaction with a plain INSERT at a
// steady rate; latency = commit returned -> first read by the consumer. idle: the
// statements the workers run with nothing to send.

package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const aggregates = 10000

type drainResult struct {
	peer           string
	events         int
	secs           float64
	stmtsPerEvent  float64
	dups, reorders int64
	top            []stmtStat
	cpu            cpuSample
	stages         string
	wal            int64 // bytes of WAL the cluster wrote during the drain
	updDel         int64 // n_tup_upd + n_tup_del of the peer's table during the drain
}

func (r drainResult) rate() float64 { return float64(r.events) / r.secs }

// pgCPUPerEvent is the PostgreSQL CPU the drain cost per event, in µs.
func pgCPUPerEvent(r drainResult) float64 { return 1e6 * r.cpu["postgres"] / float64(r.events) }

// drain relays n bulk-loaded events (after `history` SENT rows) with `workers` processes.
func (s *stack) drain(p peer, tag string, n, history, workers int) (drainResult, error) {
	res := drainResult{peer: p.name(), events: n}
	w := newWorkload(tag, n, aggregates, 42)
	super, relayDSN, db, err := s.peerDatabase(p, tag)
	if err != nil {
		return res, err
	}
	// Last, after the workers stopped and db closed: its autovacuum (after a v1 run,
	// two dead tuples per event) must not write WAL or burn PostgreSQL CPU that the
	// next run is charged with (a 1,000,000-event v1 drain before the v2 one showed
	// as 95 B of WAL per v2 event instead of 10).
	defer s.dropDatabase(super)
	defer db.Close()
	defer s.dropSlots(dbName(super)) // after the workers stopped (deferred later, run earlier)
	if history > 0 {
		hp, ok := p.(historyPeer)
		if !ok {
			return res, fmt.Errorf("-history: peer %s cannot hold history", p.name())
		}
		if err := hp.loadHistory(db, tag, history); err != nil {
			return res, err
		}
	}
	if err := p.load(db, w); err != nil {
		return res, err
	}
	if err := prepareTable(db); err != nil {
		return res, err
	}
	if err := s.createTopics(w.topics[0], w.topics[1]); err != nil {
		return res, err
	}
	c, err := startConsumer(s.brokers, w, n, n, func(seq int) (int, int64) {
		return w.events[seq].agg, w.events[seq].version
	})
	if err != nil {
		return res, err
	}
	defer c.close()
	if err := s.resetStatements(); err != nil {
		return res, err
	}
	m, err := s.startTableMeter(db, p)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	ps, err := p.start(super, relayDSN, s.brokers, workers)
	defer stopAll(ps)
	if err != nil {
		return res, err
	}
	s.prof.cpu(p, tag, 3*time.Second)
	cpu0 := s.sampleCPU(ps)
	if err := waitDrained(c, p, db, ps, 10*time.Minute); err != nil {
		return res, err
	}
	res.secs = time.Since(t0).Seconds()
	res.cpu = s.sampleCPU(ps).since(cpu0)
	if res.wal, err = m.walSince(); err != nil {
		return res, err
	}
	if rp, ok := relayOf(p); ok {
		res.stages = rp.stages()
	}
	s.prof.finish(p, tag)
	stopAll(ps)
	if res.updDel, err = m.writesSince(); err != nil { // after the workers' backends exited
		return res, err
	}
	calls, err := s.statements(dbName(super))
	if err != nil {
		return res, err
	}
	res.stmtsPerEvent = calls / float64(n)
	res.dups, res.reorders = c.dups.Load(), c.reorders.Load()
	res.top, err = s.topStatements(dbName(super))
	return res, err
}

// waitDrained waits until the consumer read every event and the peer settled.
func waitDrained(c *consumer, p peer, db *sql.DB, ps []*proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !c.waitAll(100 * time.Millisecond) {
		for _, pr := range ps {
			if err := pr.exited(); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: only %d of %d events read after %s", p.name(), c.distinct.Load(), c.want, timeout)
		}
	}
	for {
		ok, err := p.settled(db)
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: every event read but rows not settled after %s", p.name(), timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// prepareTable runs what the issue prescribes before workers start.
func prepareTable(db *sql.DB) error {
	for _, q := range []string{`VACUUM ANALYZE`, `CHECKPOINT`} {
		if _, err := db.Exec(q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

type latResult struct {
	peer                  string
	rate                  int
	n, missing            int
	p50, p95, p99, max    time.Duration
	stmtsPerEvent         float64
	idleStmtsPerWorkerSec float64
	reorders              int64
	stages                string
	top                   []stmtStat
}

// latency runs producers at rate events/s for warm+dur and measures the events
// committed after the warm-up.
func (s *stack) latency(p peer, tag string, rate, workers int, warm, dur time.Duration, idle bool) (latResult, error) {
	res := latResult{peer: p.name(), rate: rate}
	w := latencyWorkload(tag, aggregates)
	super, relayDSN, db, err := s.peerDatabase(p, tag)
	if err != nil {
		return res, err
	}
	// Last, after the workers stopped and db closed: its autovacuum (after a v1 run,
	// two dead tuples per event) must not write WAL or burn PostgreSQL CPU that the
	// next run is charged with (a 1,000,000-event v1 drain before the v2 one showed
	// as 95 B of WAL per v2 event instead of 10).
	defer s.dropDatabase(super)
	defer db.Close()
	defer s.dropSlots(dbName(super)) // after the workers stopped (deferred later, run earlier)
	if err := s.createTopics(w.topics[0], w.topics[1]); err != nil {
		return res, err
	}
	capacity := int(float64(rate)*(warm+dur).Seconds()*1.5) + 1000
	meta := make([]atomic.Int64, capacity) // seq -> agg<<32 | version
	c, err := startConsumer(s.brokers, w, capacity, capacity+1, func(seq int) (int, int64) {
		v := meta[seq].Load()
		return int(v >> 32), v & 0xffffffff
	})
	if err != nil {
		return res, err
	}
	defer c.close()
	ps, err := p.start(super, relayDSN, s.brokers, workers)
	defer stopAll(ps)
	if err != nil {
		return res, err
	}
	time.Sleep(time.Second) // workers connected and idle
	if err := s.resetStatements(); err != nil {
		return res, err
	}
	s.prof.cpu(p, tag, warm+dur)
	pr := produce(db, p, w, meta, rate, warm, dur)
	if pr.err != nil {
		return res, pr.err
	}
	// Wait for the measured events (bounded: a peer that cannot keep up shows as missing).
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && !allSeen(c, pr.from, pr.to) {
		time.Sleep(20 * time.Millisecond)
	}
	calls, err := s.statements(dbName(super))
	if err != nil {
		return res, err
	}
	res.stmtsPerEvent = calls / float64(pr.to)
	if res.top, err = s.topStatements(dbName(super)); err != nil {
		return res, err
	}
	var lats []time.Duration
	dumpLatencies(p.name(), rate, c, pr, meta)
	for seq := pr.from; seq < pr.to; seq++ {
		at := c.seen[seq].Load()
		if at == 0 {
			res.missing++
			continue
		}
		lats = append(lats, max(0, time.Duration(at-pr.committed[seq].Load())))
	}
	res.n = len(lats)
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	if len(lats) > 0 {
		pct := func(q float64) time.Duration { return lats[min(len(lats)-1, int(q*float64(len(lats))))] }
		res.p50, res.p95, res.p99, res.max = pct(0.50), pct(0.95), pct(0.99), lats[len(lats)-1]
	}
	res.reorders = c.reorders.Load()
	if rp, ok := relayOf(p); ok {
		res.stages = rp.stages()
	}
	if idle {
		if res.idleStmtsPerWorkerSec, err = s.idleCost(dbName(super), workers); err != nil {
			return res, err
		}
	}
	s.prof.finish(p, tag)
	return res, nil
}

func allSeen(c *consumer, from, to int) bool {
	for seq := from; seq < to; seq++ {
		if c.seen[seq].Load() == 0 {
			return false
		}
	}
	return true
}

// idleCost counts the workers' statements over 10 s with nothing to send.
func (s *stack) idleCost(db string, workers int) (float64, error) {
	time.Sleep(2 * time.Second) // let the last batch's marks and any backoff settle
	if err := s.resetStatements(); err != nil {
		return 0, err
	}
	const window = 10 * time.Second
	time.Sleep(window)
	calls, err := s.statements(db)
	return calls / window.Seconds() / float64(workers), err
}

type produced struct {
	committed []atomic.Int64 // seq -> unix nanos when the commit returned
	from, to  int            // measured sequence numbers [from, to)
	err       error
}

// produce runs 8 producers at rate events/s in total, each committing one event per
// transaction with the peer's plain INSERT; producer k owns the aggregates agg%8 == k,
// so each aggregate's versions are committed in order.
func produce(db *sql.DB, p peer, w *workload, meta []atomic.Int64, rate int, warm, dur time.Duration) produced {
	const producers = 8
	pr := produced{committed: make([]atomic.Int64, len(meta))}
	var next atomic.Int64
	var measuredFrom atomic.Int64
	measuredFrom.Store(-1)
	start := time.Now()
	stop := start.Add(warm + dur)
	interval := time.Duration(float64(time.Second) * producers / float64(rate))
	var wg sync.WaitGroup
	var errOnce sync.Once
	q := p.insertSQL()
	for k := 0; k < producers; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(k), 1))
			versions := map[int]int64{}
			for i := 0; ; i++ {
				due := start.Add(time.Duration(i)*interval + time.Duration(k)*interval/producers)
				if due.After(stop) {
					return
				}
				time.Sleep(time.Until(due))
				seq := int(next.Add(1) - 1)
				if seq >= len(meta) {
					return
				}
				if !due.Before(start.Add(warm)) {
					measuredFrom.CompareAndSwap(-1, int64(seq))
				}
				agg := rng.IntN(aggregates/producers)*producers + k
				versions[agg]++
				e := event{seq: seq, agg: agg, version: versions[agg]}
				meta[seq].Store(int64(agg)<<32 | e.version)
				if _, err := db.ExecContext(context.Background(), q, p.args(w, e)...); err != nil {
					errOnce.Do(func() { pr.err = fmt.Errorf("producer: %w", err) })
					return
				}
				pr.committed[seq].Store(time.Now().UnixNano())
			}
		}()
	}
	wg.Wait()
	pr.from, pr.to = int(max(0, measuredFrom.Load())), int(next.Load())
	pr.to = min(pr.to, len(meta))
	return pr
}

type stmtStat struct {
	calls   int64
	totalMS float64
	meanMS  float64
	rows    int64
	query   string
}

func (s *stack) resetStatements() error {
	_, err := s.admin.Exec(`SELECT pg_stat_statements_reset()`)
	return err
}

// statements counts what the relay role ran in database db since the last reset
// (every statement, including BEGIN/COMMIT and LISTEN).
func (s *stack) statements(db string) (float64, error) {
	var n float64
	err := s.admin.QueryRow(`SELECT COALESCE(sum(calls), 0)::float8 FROM pg_stat_statements s
JOIN pg_roles r ON r.oid = s.userid JOIN pg_database d ON d.oid = s.dbid
WHERE r.rolname = $1 AND d.datname = $2`, relayRole, db).Scan(&n)
	return n, err
}

func (s *stack) topStatements(db string) ([]stmtStat, error) {
	rows, err := s.admin.Query(`SELECT calls, total_exec_time, mean_exec_time, rows,
    left(regexp_replace(query, '\s+', ' ', 'g'), 90)
FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid JOIN pg_database d ON d.oid = s.dbid
WHERE r.rolname = $1 AND d.datname = $2 ORDER BY total_exec_time DESC LIMIT 6`, relayRole, db)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []stmtStat
	for rows.Next() {
		var st stmtStat
		if err := rows.Scan(&st.calls, &st.totalMS, &st.meanMS, &st.rows, &st.query); err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

func dbName(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(u.Path, "/")
}

// dumpLatencies writes the seq, aggregate, commit and first-read times of every
// measured event into the -dump directory, if one is set.
func dumpLatencies(name string, rate int, c *consumer, pr produced, meta []atomic.Int64) {
	dir := *dumpDir
	if dir == "" {
		return
	}
	var b strings.Builder
	for seq := pr.from; seq < pr.to; seq++ {
		fmt.Fprintf(&b, "%d\t%d\t%d\t%d\n", seq, meta[seq].Load()>>32, pr.committed[seq].Load(), c.seen[seq].Load())
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.tsv", strings.ReplaceAll(name, " ", "_"), rate))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "-dump: %v\n", err)
	}
}
