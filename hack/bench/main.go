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
	history  = flag.Int("history", 0, "SENT rows of history in the table before the drain (relay only; compared with a drain without)")
	workers  = flag.Int("workers", 2, "worker processes per peer")
	rates    = flag.String("rates", "1000,5000", "producer rates of the latency runs (events/s)")
	duration = flag.Duration("duration", 20*time.Second, "measured part of each latency run")
	warmup   = flag.Duration("warmup", 3*time.Second, "unmeasured start of each latency run")
	runsFlag = flag.String("runs", "limits,drain,latency,consumers", "which runs: limits (statements alone, broker alone), drain, latency, consumers")
	peers    = flag.String("peers", "relay,cdc,watermill,v1", "peers: relay (polling), cdc (the relay in LogicalReplication mode), watermill, v1 (a straightforward v1 relay, drain only), relay-v2 (the relay on a table of contract v2)")
	fsync    = flag.Bool("fsync", true, "PostgreSQL fsync (durable commits, as in production)")
	profile  = flag.String("profile", "", "directory for the relay workers' CPU, block and mutex profiles")
	verbose  = flag.Bool("v", false, "print the top statements of each drain (pg_stat_statements)")

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
		{"-runs", *runsFlag, "limits,drain,latency,consumers"}, {"-peers", *peers, "relay,cdc,watermill,v1,relay-v2"},
	} {
		for _, v := range strings.Split(list.value, ",") {
			if !has(list.known, v) {
				return fmt.Errorf("%s: unknown %q (want some of %s)", list.flag, strings.TrimSpace(v), list.known)
			}
		}
	}
	withPeer := has(*peers, "watermill")
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
		if err := drains(s, withPeer, lim); err != nil {
			return err
		}
	}
	if has(*runsFlag, "latency") {
		if err := latencies(s, withPeer); err != nil {
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

func drains(s *stack, withPeer bool, lim []limitResult) error {
	fmt.Printf("drain: %d events bulk-loaded (COPY, 10,000-row transactions), VACUUM ANALYZE + CHECKPOINT, then %d workers\n"+
		"(relay: %s); ends when every row is settled and every event was read\n",
		*events, *workers, strings.Join(drainFlags, " "))
	fmt.Printf("  %-34s %10s %10s %12s %12s %8s %9s\n", "peer", "events", "seconds", "events/s", "stmts/event", "dups", "reorders")
	var results []drainResult
	runOne := func(p peer, tag string, hist int) error {
		r, err := s.drain(p, tag, *events, hist, *workers)
		if err != nil {
			return fmt.Errorf("drain %s: %w", p.name(), err)
		}
		results = append(results, r)
		fmt.Printf("  %-34s %10d %10.2f %12.0f %12.4f %8d %9d\n", r.peer, r.events, r.secs, r.rate(), r.stmtsPerEvent, r.dups, r.reorders)
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
	if has(*peers, "relay") {
		if err := runOne(s.relay("relay", drainFlags, false), "d-relay", 0); err != nil {
			return err
		}
		if len(lim) > 0 {
			fmt.Printf("  relay / statements alone: %.0f %%; relay / broker alone: %.0f %%\n",
				100*results[0].rate()/lim[0].rate(), 100*results[0].rate()/lim[1].rate())
		}
		if *history > 0 {
			p := s.relay("relay, "+strconv.Itoa(*history)+" SENT rows of history", drainFlags, false)
			if err := runOne(p, "d-hist", *history); err != nil {
				return err
			}
			fmt.Printf("  with history: %.2f x the drain rate without\n", results[len(results)-1].rate()/results[0].rate())
		}
	}
	if has(*peers, "relay-v2") {
		if err := runOne(s.relayV2("relay, table contract v2", drainFlags, false), "d-relay-v2", 0); err != nil {
			return err
		}
		if has(*peers, "relay") {
			fmt.Printf("  relay v2 / relay: %.2f x; PostgreSQL CPU per event: relay %.1f µs, relay v2 %.1f µs\n",
				results[len(results)-1].rate()/results[0].rate(), pgCPUPerEvent(results[0]), pgCPUPerEvent(results[len(results)-1]))
		}
	}
	if has(*peers, "cdc") {
		if err := runOne(s.cdc("relay, LogicalReplication", drainFlags), "d-cdc", 0); err != nil {
			return err
		}
		if has(*peers, "relay") {
			fmt.Printf("  LogicalReplication / polling: %.2f x\n", results[len(results)-1].rate()/results[0].rate())
		}
	}
	if has(*peers, "v1") {
		if err := runOne(s.v1(), "d-v1", 0); err != nil {
			return err
		}
		if has(*peers, "relay") {
			fmt.Printf("  relay / straightforward v1 relay: %.2f x\n", results[0].rate()/results[len(results)-1].rate())
		}
	}
	if withPeer {
		if err := runOne(&watermillPeer{bin: s.peerBin}, "d-wm", 0); err != nil {
			return err
		}
		if has(*peers, "relay") {
			fmt.Printf("  relay / watermill: %.1f x\n", results[0].rate()/results[len(results)-1].rate())
		}
	}
	fmt.Printf("  load avg at the end: %s\n\n", loadAvg())
	return nil
}

func latencies(s *stack, withPeer bool) error {
	fmt.Printf("latency: 8 producers, one event per transaction, plain INSERT (no NOTIFY unless named), %s warm-up then %s;\n"+
		"latency = commit returned -> first read by the consumer; relay workers on default settings\n", *warmup, *duration)
	fmt.Printf("  %-30s %7s %8s %8s %8s %8s %8s %8s %12s %10s\n", "peer", "ev/s", "events", "missing", "p50 ms", "p95 ms", "p99 ms", "max ms", "stmts/event", "idle st/s")
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
	if withPeer {
		ps = append(ps, &watermillPeer{bin: s.peerBin})
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
	}
	fmt.Println("  idle st/s: statements per worker per second over 10 s with nothing to send (pg_stat_statements)")
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func printTop(top []stmtStat) {
	for _, st := range top {
		fmt.Printf("      %8d calls %9.0f ms (%.2f ms each) %8d rows  %s\n", st.calls, st.totalMS, st.meanMS, st.rows, st.query)
	}
}
