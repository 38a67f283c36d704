package outboxstats

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The windows count visits only the windows' rows: every scan of the outbox table
// that runs is bounded by a seq range or a txid, never by the shard alone, which
// walks the shard's whole history on every status read (PostgreSQL does not use
// "txid = ANY (xid8[])" as an index condition; shardstore's read had the same plan
// and TestReadAndIdleCloseProbeOnlyTheWindow checks it there). Checked on a table
// with history in two states, each with an ended transaction to probe in every
// shard: windows at a boundary that starts at a tick a transaction straddled (part
// 0), and windows read in parts whose fixed hi tick it straddled (part 2). In both,
// Pending is what the relay then reads.
func TestReadV2CountProbesOnlyTheWindows(t *testing.T) {
	for _, inParts := range []bool{false, true} {
		t.Run("in parts "+strconv.FormatBool(inParts), func(t *testing.T) {
			f := newV2(t, 256)
			f.exec(`INSERT INTO ob SELECT 'pre-' || g, 'order', 'agg-' || (g % 1000), g / 1000, 'order.changed', 1, 'orders', 'k', '{}'
FROM generate_series(1, 20000) g`)
			f.exec(`ANALYZE ob`)
			f.rebalance()
			f.tick()
			f.drain(5000)
			before := f.count(`SELECT max(tick) FROM ob_tick`)
			straddle := f.conn()
			if _, err := straddle.ExecContext(bg, `BEGIN`); err != nil {
				t.Fatal(err)
			}
			f.insert(straddle, "straddle", "agg-straddle", 1)
			f.tick() // its xip list holds straddle's transaction
			// The state the tick's idle close (every shard's window moved to the
			// straddled tick) or a read in parts (hi fixed at it, pos at the last row
			// published) leaves, set directly for every shard.
			if inParts {
				f.exec(`INSERT INTO ob_cursor (shard, lo_tick, hi_tick, pos) SELECT shard, $1, (SELECT max(tick) FROM ob_tick), (SELECT max(seq) FROM ob) FROM ob_lease`, before)
			} else {
				f.exec(`INSERT INTO ob_cursor (shard, lo_tick) SELECT shard, (SELECT max(tick) FROM ob_tick) FROM ob_lease`)
			}
			if _, err := straddle.ExecContext(bg, `COMMIT`); err != nil {
				t.Fatal(err)
			}
			f.insert(f.db, "after", "agg-after", 1)

			plan := f.explainWindows()
			byTxid, bySeq, bad := outboxScans(plan)
			if len(bad) > 0 || byTxid < 1 || bySeq < 1 {
				t.Errorf("scans of the outbox table not bounded by seq or txid: %q (by txid %d, by seq %d; want the ended id's probe and the range):\n%s",
					bad, byTxid, bySeq, plan)
			}
			t.Logf("windows count: %s", planSummary(plan))
			if s := f.stats(); s.Pending != 2 || s.PendingEstimated {
				t.Fatalf("pending %+v, want straddle and after", s)
			}
			f.tick()
			// A drain stops at a batch with no events: the first one of a window read
			// in parts may only close it.
			if got := f.drain(500) + f.drain(500); got != 2 {
				t.Fatalf("the relay read %d, the status counted 2", got)
			}
		})
	}
}

var (
	outboxScan = regexp.MustCompile(`(Seq Scan on ob o|Index (Only )?Scan using ob_\w+ on ob o|Bitmap Index Scan on ob_\w+)`)
	txidCond   = regexp.MustCompile(`Index Cond: .*txid = `)
	seqCond    = regexp.MustCompile(`Index Cond: .*seq > `)
)

// outboxScans counts the plan's scans of the outbox table that ran (not "never
// executed") with an index condition on a txid or a seq range, and returns the
// others.
func outboxScans(plan string) (byTxid, bySeq int, bad []string) {
	lines := strings.Split(plan, "\n")
	for i, l := range lines {
		if !outboxScan.MatchString(l) || strings.Contains(l, "never executed") {
			continue
		}
		cond := ""
		for _, n := range lines[i+1:] {
			if strings.Contains(n, "->") {
				break
			}
			if strings.Contains(n, "Index Cond:") {
				cond = n
				break
			}
		}
		switch {
		case txidCond.MatchString(cond):
			byTxid++
		case seqCond.MatchString(cond):
			bySeq++
		default:
			bad = append(bad, strings.TrimSpace(l)+" / "+strings.TrimSpace(cond))
		}
	}
	return byTxid, bySeq, bad
}

// planSummary is the plan's total buffers and execution time, for the log.
func planSummary(plan string) string {
	var out []string
	for _, l := range strings.Split(plan, "\n") {
		l = strings.TrimSpace(l)
		if (strings.HasPrefix(l, "Buffers:") && len(out) == 0) || strings.HasPrefix(l, "Execution Time:") {
			out = append(out, l)
		}
	}
	return strings.Join(out, ", ")
}
