// gate_report.go: the gate's runs and its table (-runs limits, sizes from
// -gate-events), and the producers' own INSERT cost per row on either table.

package main

import (
	"database/sql"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

var (
	gateEvents    = flag.String("gate-events", "100000,1000000", "pre-loaded rows of issue 21's gate runs in -runs limits (v2 hot path vs v1 claim + mark); empty: none")
	producerCount = flag.Int("producer-rows", 20000, "rows of the producers' own INSERT cost runs of the gate")
)

// gateSizes parses -gate-events.
func gateSizes() ([]int, error) {
	var out []int
	for _, f := range strings.Split(*gateEvents, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-gate-events: %q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// gate runs the correctness check, then v1 and v2 statements alone at each size
// (v1 reused from done when measured already), then the producers' costs, and
// prints the table.
func gate(s *stack, sizes []int, done map[int]cost) error {
	if err := s.gateCheck(); err != nil {
		return err
	}
	fmt.Printf("gate (issue 21): the statements alone, no broker, %d loops on their own connections, batches of 500,\n"+
		"after COPY + VACUUM ANALYZE + CHECKPOINT; v2 correctness check passed (late lower txid, subtransaction, long transaction elsewhere)\n", *workers)
	fmt.Printf("  %-8s %-38s %7s %9s %10s %10s %8s %8s %7s %7s  %s\n", "rows", "design", "s", "events/s", "PG CPU µs", "client µs", "WAL B", "upd+del", "(HOT)", "v2/v1", "load avg")
	// The producers first, on a server with no big table to vacuum.
	v2p, err := producers(s)
	if err != nil {
		return err
	}
	var v2s []cost
	for _, n := range sizes {
		v1, ok := done[n]
		if !ok {
			var err error
			if v1, err = s.v1Alone(fmt.Sprintf("g1-%d", n), n, *workers); err != nil {
				return fmt.Errorf("v1 statements alone: %w", err)
			}
		}
		printCost(n, v1, "")
		v2, err := s.v2Alone(fmt.Sprintf("g2-%d", n), n, *workers)
		if err != nil {
			return fmt.Errorf("v2 statements alone: %w", err)
		}
		printCost(n, v2, fmt.Sprintf("%.2f", v2.rate()/v1.rate()))
		fmt.Printf("  %-8s bulk load per row (COPY, 10,000-row transactions): v1 %.1f µs %5.0f B; v2 %.1f µs %5.0f B\n", "",
			1e6*v1.loadCPU/float64(n), float64(v1.loadWAL)/float64(n), 1e6*v2.loadCPU/float64(n), float64(v2.loadWAL)/float64(n))
		v2s = append(v2s, v2)
	}
	for _, c := range v2s {
		fmt.Printf("  v2 relay / v2 producer INSERT, %d rows: CPU %.2f x, WAL %.3f x\n", c.n,
			c.cpuPerEvent()/v2p.cpuPerEvent(), c.walPerEvent()/v2p.walPerEvent())
	}
	fmt.Println()
	return nil
}

func printCost(n int, c cost, ratio string) {
	fmt.Printf("  %-8d %-38s %7.2f %9.0f %10.1f %10.1f %8.1f %8.2f %7.2f %7s  %s\n", n, c.what, c.secs, c.rate(), c.cpuPerEvent(),
		1e6*c.cpu["harness+consumer"]/float64(c.n), c.walPerEvent(), float64(c.updDel)/float64(c.n), float64(c.hotUpd)/float64(c.n), ratio, loadAvg())
}

// producers measures the producers' own INSERT on either table; it returns v2's.
func producers(s *stack) (cost, error) {
	const k = 8
	fmt.Printf("  producers' own INSERT per row: %d producers, one-row transactions (plain INSERT, as the latency run), %d rows into an empty table\n", k, *producerCount)
	v1p, err := s.producerCost("v1 table (relayworker migrate)", "gp-v1", func(super string, _ *sql.DB) error {
		return (&relayPeer{bin: s.relayBin}).setup(super)
	}, (&relayPeer{}).insertSQL(), *producerCount, k)
	if err != nil {
		return cost{}, err
	}
	v2p, err := s.producerCost("v2 table", "gp-v2", func(_ string, db *sql.DB) error { return gateSetup(db) },
		gateInsertSQL, *producerCount, k)
	if err != nil {
		return cost{}, err
	}
	for _, c := range []cost{v1p, v2p} {
		fmt.Printf("  %-8s %-38s %7.2f %9.0f %10.1f %10.1f %8.1f %8s %7s %7s  %s\n", "", c.what, c.secs, c.rate(), c.cpuPerEvent(),
			1e6*c.cpu["harness+consumer"]/float64(c.n), c.walPerEvent(), "", "", "", loadAvg())
	}
	return v2p, nil
}

// producerCost inserts n rows with k producers, one row per transaction, into a
// fresh database prepared by setup, and measures PostgreSQL's CPU and WAL.
func (s *stack) producerCost(what, tag string, setup func(super string, db *sql.DB) error, insert string, n, k int) (cost, error) {
	res := cost{what: what, n: n}
	super, _, db, err := s.newDatabase(tag)
	if err != nil {
		return res, err
	}
	defer s.dropDatabase(super)
	defer db.Close()
	if err := setup(super, db); err != nil {
		return res, err
	}
	w := newWorkload(tag, n, aggregates, 42)
	p := &relayPeer{}
	m, err := s.startMeter()
	if err != nil {
		return res, err
	}
	errs := make(chan error, k)
	var wg sync.WaitGroup
	for g := 0; g < k; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += k {
				if _, err := db.Exec(insert, p.args(w, w.events[i])...); err != nil {
					errs <- fmt.Errorf("producer: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	return res, m.stop(&res)
}
