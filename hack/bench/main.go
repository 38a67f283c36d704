// Command bench measures relays as users run them (make bench): worker processes with
// the flags a pod gets, a private PostgreSQL with fsync on, a Kafka-protocol broker in
// its own process (hack/devbroker) and a live franz-go consumer reading what arrives.
// Each run is made by this product's `relayworker` and by a named peer (Watermill's
// SQL -> Kafka forwarder) on the same workload in the same invocation, and the table
// gives the ratio. Workload: workload.go; runs: runs.go.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

var (
	events   = flag.Int("events", 100000, "events per drain run")
	history  = flag.Int("history", 0, "rows of history in the table before the drain (relay: SENT rows; relay-v2: rows every shard's cursor passed); compared with a drain without")
	workers  = flag.Int("workers", 2, "worker processes per peer")
	rates    = flag.String("rates", "1000,5000", "producer rates of the latency runs (events/s)")
	duration = flag.Duration("duration", 20*time.Second, "measured part of each latency run")
	warmup   = flag.Duration("warmup", 3*time.Second, "unmeasured start of each latency run")
	runsFlag = flag.String("runs", "limits,drain,latency,consumers", "which runs: limits (statements alone, broker alone), drain, latency, "+
		"latency-longtx (relay and relay-v2 at -longtx-rate without and with an open write transaction in another database), consumers")
	peers = flag.String("peers", "relay,cdc,watermill,v1", "peers: relay (polling), cdc (the relay in LogicalReplication mode), watermill (Watermill's defaults), "+
		"watermill-tuned (batch size and poll interval of the relay's drain flags), v1 (a straightforward v1 relay, drain only), relay-v2 (the relay on a table of contract v2)")
	fsync   = flag.Bool("fsync", true, "PostgreSQL fsync (durable commits, as in production)")
	profile = flag.String("profile", "", "directory for the relay workers' CPU, block and mutex profiles")
	verbose = flag.Bool("v", false, "print the top statements of each drain (pg_stat_statements)")
	dumpDir = flag.String("dump", "", "directory for each latency run's per-event times (<peer>-<rate>.tsv: seq, aggregate, "+
		"commit and first-read unix nanos) and every spawned process's log (<n>-<name>.log, n in start order): to find where a tail comes from")
	pgSet = flag.String("pg-set", "", "extra PostgreSQL settings, space-separated name=value (e.g. \"log_lock_waits=on deadlock_timeout=100ms\")")

	consumerEvents = flag.Int("consumer-events", 20000, "messages per consumer run")
	consumerBatch  = flag.Int("consumer-batch", 500, "messages per transaction in the batched consumer run")
)

// drainFlags are the relay settings of the drain run (issue 7's workload).
var drainFlags = []string{"--batch-size", "500", "--lease", "30s", "--poll-interval", "200ms"}

func main() {
	flag.Parse()
	if err := benchmark(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func has(list, x string) bool {
	for _, v := range strings.Split(list, ",") {
		if strings.TrimSpace(v) == x {
			return true
		}
	}
	return false
}

func benchmark() error {
	switch {
	case *events < 1:
		return fmt.Errorf("-events %d: want at least 1", *events)
	case *history < 0:
		return fmt.Errorf("-history %d: want 0 or more", *history)
	case *workers < 1:
		return fmt.Errorf("-workers %d: want at least 1", *workers)
	case *consumerEvents < 1 || *consumerBatch < 1 || *consumerBatch > 10000:
		return fmt.Errorf("-consumer-events %d / -consumer-batch %d: want at least 1 event and a batch in [1, 10000]", *consumerEvents, *consumerBatch)
	case *duration <= 0 || *warmup < 0:
		return fmt.Errorf("-duration %s / -warmup %s: want a positive duration and a non-negative warm-up", *duration, *warmup)
	}
	for _, list := range []struct{ flag, value, known string }{
		{"-runs", *runsFlag, "limits,drain,latency,latency-longtx,consumers"}, {"-peers", *peers, "relay,cdc,watermill,watermill-tuned,v1,relay-v2"},
	} {
		for _, v := range strings.Split(list.value, ",") {
			if !has(list.known, v) {
				return fmt.Errorf("%s: unknown %q (want some of %s)", list.flag, strings.TrimSpace(v), list.known)
			}
		}
	}
	if *dumpDir != "" { // before the stack: its processes' logs go there from the start
		if err := os.MkdirAll(*dumpDir, 0o755); err != nil {
			return fmt.Errorf("-dump: %w", err)
		}
	}
	withPeer := has(*peers, "watermill") || has(*peers, "watermill-tuned")
	s, err := startStack(*fsync, withPeer, has(*peers, "cdc"))
	defer s.close()
	if err != nil {
		return err
	}
	if *profile != "" {
		if err := os.MkdirAll(*profile, 0o755); err != nil {
			return err
		}
		s.prof = &profiler{dir: *profile}
	}
	fsyncWord := map[bool]string{true: "on", false: "off"}[*fsync]
	walLevel := map[bool]string{true: "logical (the cdc peer needs it; every peer runs on it)", false: "replica"}[has(*peers, "cdc")]
	fmt.Printf("workload: %d aggregates x ~%d versions interleaved, 2 topics x 6 partitions, key = aggregate id,\n"+
		"~300-byte JSON payloads, headers on every second event; PostgreSQL fsync %s, wal_level %s; %d worker processes per peer;\n"+
		"broker: kfake (hack/devbroker) in its own process; a franz-go consumer reads every event.\n\n",
		aggregates, max(1, *events/aggregates), fsyncWord, walLevel, *workers)
	var lim []limitResult
	if has(*runsFlag, "limits") {
		if lim, err = limits(s); err != nil {
			return err
		}
	}
	if has(*runsFlag, "drain") {
		if err := drains(s, lim); err != nil {
			return err
		}
	}
	if has(*runsFlag, "latency") {
		if err := latencies(s); err != nil {
			return err
		}
	}
	if has(*runsFlag, "latency-longtx") {
		if err := latencyLongTx(s); err != nil {
			return err
		}
	}
	if has(*runsFlag, "consumers") {
		if err := consumers(s); err != nil {
			return err
		}
	}
	return nil
}

func (s *stack) relay(label string, flags []string, notify bool) *relayPeer {
	return &relayPeer{bin: s.relayBin, flags: flags, notify: notify, label: label, profile: s.prof != nil}
}

func limits(s *stack) ([]limitResult, error) {
	sizes, err := gateSizes()
	if err != nil {
		return nil, err
	}
	fmt.Printf("machine limits for the drain workload (%d events; what the relay's work costs without the rest; load avg %s):\n", *events, loadAvg())
	v1, err := s.v1Alone("lim-sql", *events, *workers)
	if err != nil {
		return nil, fmt.Errorf("statements alone: %w", err)
	}
	st := limitResult{what: "statements alone (claim + mark SENT, no broker)", n: *events, secs: v1.secs, cpu: v1.cpu}
	br, err := s.brokerAlone("lim-kafka", *events, *workers)
	if err != nil {
		return nil, err
	}
	for _, r := range []limitResult{st, br} {
		fmt.Printf("  %-58s %8.2f s %10.0f events/s   CPU s: postgres %.1f, broker %.1f, harness %.1f\n", r.what, r.secs, r.rate(),
			r.cpu["postgres"], r.cpu["broker"], r.cpu["harness+consumer"])
	}
	fmt.Println()
	if len(sizes) > 0 {
		if err := gate(s, sizes, map[int]cost{*events: v1}); err != nil {
			return nil, fmt.Errorf("gate: %w", err)
		}
	}
	return []limitResult{st, br}, nil
}

func drains(s *stack, lim []limitResult) error {
	fmt.Printf("drain: %d events bulk-loaded (COPY, 10,000-row transactions), VACUUM ANALYZE + CHECKPOINT, then %d workers\n"+
		"(relay: %s); ends when every row is settled and every event was read;\n"+
		"per event: the peer table's n_tup_upd + n_tup_del, the cluster's WAL bytes and PostgreSQL's CPU over the drain\n",
		*events, *workers, strings.Join(drainFlags, " "))
	fmt.Printf("  %-40s %9s %8s %9s %11s %6s %8s %9s %8s %8s\n", "peer", "events", "seconds", "events/s", "stmts/event", "dups", "reorders",
		"upd+del/e", "WAL B/e", "PG µs/e")
	got := map[string]drainResult{} // by -peers name, "+hist" for the run behind history
	runOne := func(key string, p peer, tag string, hist int) error {
		r, err := s.drain(p, tag, *events, hist, *workers)
		if err != nil {
			return fmt.Errorf("drain %s: %w", p.name(), err)
		}
		got[key] = r
		updDel := "-"
		if r.updDel >= 0 {
			updDel = fmt.Sprintf("%.3f", r.updDelPerEvent())
		}
		fmt.Printf("  %-40s %9d %8.2f %9.0f %11.4f %6d %8d %9s %8.1f %8.1f\n", r.peer, r.events, r.secs, r.rate(), r.stmtsPerEvent,
			r.dups, r.reorders, updDel, r.walPerEvent(), pgCPUPerEvent(r))
		if *verbose {
			fmt.Printf("      CPU seconds: postgres %.1f, workers %.1f, broker %.1f, harness+consumer %.1f (of %.1f on 2 cores)\n",
				r.cpu["postgres"], r.cpu["workers"], r.cpu["broker"], r.cpu["harness+consumer"], 2*r.secs)
			if r.stages != "" {
				fmt.Printf("      %s\n", r.stages)
			}
			printTop(r.top)
		}
		return nil
	}
	ratio := func(a, b, what string) {
		ra, okA := got[a]
		rb, okB := got[b]
		if okA && okB {
			fmt.Printf("  %s: %.2f x\n", what, ra.rate()/rb.rate())
		}
	}
	hist := " " + strconv.Itoa(*history) + " rows of history"
	if has(*peers, "relay") {
		if err := runOne("relay", s.relay("relay", drainFlags, false), "d-relay", 0); err != nil {
			return err
		}
		if len(lim) > 0 {
			fmt.Printf("  relay / statements alone: %.0f %%; relay / broker alone: %.0f %%\n",
				100*got["relay"].rate()/lim[0].rate(), 100*got["relay"].rate()/lim[1].rate())
		}
		if *history > 0 {
			if err := runOne("relay+hist", s.relay("relay, SENT"+hist, drainFlags, false), "d-hist", *history); err != nil {
				return err
			}
			ratio("relay+hist", "relay", "relay with history / without")
		}
	}
	if has(*peers, "relay-v2") {
		if err := runOne("relay-v2", s.relayV2("relay, table contract v2", drainFlags, false), "d-relay-v2", 0); err != nil {
			return err
		}
		ratio("relay-v2", "relay", "relay v2 / relay")
		if *history > 0 {
			p := s.relayV2("relay v2, passed"+hist, drainFlags, false)
			if err := runOne("relay-v2+hist", p, "d-hist-v2", *history); err != nil {
				return err
			}
			ratio("relay-v2+hist", "relay-v2", "relay v2 with history / without (target >= 0.95)")
		}
	}
	if has(*peers, "cdc") {
		if err := runOne("cdc", s.cdc("relay, LogicalReplication", drainFlags), "d-cdc", 0); err != nil {
			return err
		}
		ratio("cdc", "relay", "LogicalReplication / polling")
	}
	if has(*peers, "v1") {
		if err := runOne("v1", s.v1(), "d-v1", 0); err != nil {
			return err
		}
		ratio("relay", "v1", "relay / straightforward v1 relay")
		ratio("relay-v2", "v1", "relay v2 / straightforward v1 relay")
	}
	if has(*peers, "watermill") {
		if err := runOne("watermill", s.watermill(), "d-wm", 0); err != nil {
			return err
		}
		ratio("relay", "watermill", "relay / watermill")
		ratio("relay-v2", "watermill", "relay v2 / watermill")
	}
	if has(*peers, "watermill-tuned") {
		if err := runOne("watermill-tuned", s.watermillTuned(), "d-wmt", 0); err != nil {
			return err
		}
		ratio("relay", "watermill-tuned", "relay / watermill-tuned")
		ratio("relay-v2", "watermill-tuned", "relay v2 / watermill-tuned (target >= 15)")
	}
	if err := insertCostRatios(s, got); err != nil {
		return err
	}
	fmt.Printf("  load avg at the end: %s\n\n", loadAvg())
	return nil
}

// insertCostRatios prints the relay peers' PostgreSQL CPU per event against the
// producers' own INSERT per row on a table of the same contract.
func insertCostRatios(s *stack, got map[string]drainResult) error {
	var ps []peer
	var keys []string
	for _, k := range []string{"relay", "relay-v2"} {
		if _, ok := got[k]; ok {
			keys = append(keys, k)
			ps = append(ps, map[string]peer{"relay": s.relay("relay", nil, false), "relay-v2": s.relayV2("relay v2", nil, false)}[k])
		}
	}
	if len(ps) == 0 {
		return nil
	}
	ins, err := s.insertCosts(ps)
	if err != nil {
		return err
	}
	fmt.Printf("  PostgreSQL CPU per event, the drain / the producers' own INSERT per row on the same contract's table\n"+
		"  (8 producers, one-row transactions, plain INSERT, %d rows into an empty table; target for v2 <= 0.5 x):\n", *producerCount)
	for i, k := range keys {
		c := ins[ps[i].name()]
		fmt.Printf("    %-10s %7.1f µs / %7.1f µs = %.2f x   (INSERT: %.0f rows/s, %.0f B WAL per row)\n", k, pgCPUPerEvent(got[k]),
			c.cpuPerEvent(), pgCPUPerEvent(got[k])/c.cpuPerEvent(), c.rate(), c.walPerEvent())
	}
	return nil
}

func latencies(s *stack) error {
	fmt.Printf("latency: 8 producers, one event per transaction, plain INSERT (no NOTIFY unless named), %s warm-up then %s;\n"+
		"latency = commit returned -> first read by the consumer; relay workers on default settings\n", *warmup, *duration)
	printLatencyHeader()
	var rs []int
	for _, f := range strings.Split(*rates, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || r <= 0 {
			return fmt.Errorf("-rates: %q is not a positive number", f)
		}
		rs = append(rs, r)
	}
	var ps []peer
	if has(*peers, "relay") {
		ps = append(ps, s.relay("relay", nil, false), s.relay("relay, NOTIFY trigger", nil, true))
	}
	if has(*peers, "relay-v2") {
		ps = append(ps, s.relayV2("relay v2", nil, false), s.relayV2("relay v2, NOTIFY trigger", nil, true))
	}
	if has(*peers, "cdc") {
		ps = append(ps, s.cdc("relay, LogicalReplication", nil))
	}
	if has(*peers, "watermill") {
		ps = append(ps, s.watermill())
	}
	if has(*peers, "watermill-tuned") {
		ps = append(ps, s.watermillTuned())
	}
	for i, p := range ps {
		for j, rate := range rs {
			if rp, ok := p.(*relayPeer); ok && rp.notify && j > 0 {
				continue // NOTIFY is measured at the first rate only
			}
			if rp, ok := p.(*relayV2Peer); ok && rp.notify && j > 0 {
				continue
			}
			tag := fmt.Sprintf("l%d-%d", i, rate)
			idle := j == 0 && i == 0
			r, err := s.latency(p, tag, rate, *workers, *warmup, *duration, idle)
			if err != nil {
				return fmt.Errorf("latency %s at %d/s: %w", p.name(), rate, err)
			}
			idleCol := "-"
			if idle {
				idleCol = fmt.Sprintf("%.1f", r.idleStmtsPerWorkerSec)
			}
			printLatency(r, idleCol)
		}
	}
	fmt.Println("  idle st/s: statements per worker per second over 10 s with nothing to send (pg_stat_statements)")
	fmt.Printf("  load avg at the end: %s\n\n", loadAvg())
	return nil
}

func printLatencyHeader() {
	fmt.Printf("  %-30s %7s %8s %8s %8s %8s %8s %8s %12s %10s\n", "peer", "ev/s", "events", "missing", "p50 ms", "p95 ms", "p99 ms", "max ms", "stmts/event", "idle st/s")
}

// printLatency prints one latency row (idleCol: the idle statements column, or "-").
func printLatency(r latResult, idleCol string) {
	fmt.Printf("  %-30s %7d %8d %8d %8.1f %8.1f %8.1f %8.1f %12.3f %10s\n", r.peer, r.rate, r.n, r.missing,
		ms(r.p50), ms(r.p95), ms(r.p99), ms(r.max), r.stmtsPerEvent, idleCol)
	if *verbose {
		if r.stages != "" {
			fmt.Printf("      %s\n", r.stages)
		}
		printTop(r.top)
	}
	if r.reorders > 0 {
		fmt.Printf("    (%d events read after a newer version of their aggregate)\n", r.reorders)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func printTop(top []stmtStat) {
	for _, st := range top {
		fmt.Printf("      %8d calls %9.0f ms (%.2f ms each) %8d rows  %s\n", st.calls, st.totalMS, st.meanMS, st.rows, st.query)
	}
}
