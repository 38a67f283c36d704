package shardstore

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/lib/pq"
)

// The read and the tick's idle close visit only a window's rows: every scan of the
// outbox table is bounded by a seq range or a txid, never by the shard alone (which
// walks the shard's whole history on every read: PostgreSQL does not use
// "txid = ANY (xid8[])" as an index condition, and the generic plan took (shard, seq)
// for part 2's order), and neither is compiled by JIT. Checked on the plans of a table
// with history (100,000 rows loaded in one transaction, the statistics' worst case
// for the (shard, txid) probes' estimates), every shard's window starting at a tick a
// transaction straddled, so part 2 is planned and run.
func TestReadAndIdleCloseProbeOnlyTheWindow(t *testing.T) {
	forShardCounts(t, testReadAndIdleCloseProbeOnlyTheWindow)
}

// forShardCounts runs a plan test on tables of 16, 32 (the default) and 256 shards
// (the default before 2026-12-06, which tables made then keep): with fewer shards the side tables are smaller (32 shards' cursor log was one page
// when the read's generic plan was made, and the plan scanned it with a sort per
// shard instead of probing its key) and each (shard, txid) probe's estimate larger
// (the rows per shard of a bulk-loaded transaction): when a sequential scan looks
// cheaper.
func forShardCounts(t *testing.T, test func(*testing.T, int)) {
	for _, n := range []int{16, 32, 256} {
		t.Run(fmt.Sprintf("%d shards", n), func(t *testing.T) { test(t, n) })
	}
}

func testReadAndIdleCloseProbeOnlyTheWindow(t *testing.T, n int) {
	f := newFixture(t, n)
	if _, err := f.db.Exec(`INSERT INTO ob SELECT 'pre-' || g, 'order', 'agg-' || (g % 10000), g / 10000, 'order.changed', 1, 'orders', 'k', '{}'
FROM generate_series(1, 100000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec(`ANALYZE ob`); err != nil {
		t.Fatal(err)
	}
	w := f.worker("w1")
	w.rebalance()
	w.drain(500)
	// Statistics of every table, as autovacuum keeps them: with the shard table's,
	// the idle close's range probe became a hash anti join over the whole outbox table.
	if _, err := f.db.Exec(`ANALYZE`); err != nil {
		t.Fatal(err)
	}
	tx := begin(t, f.db)
	f.insert(tx, "straddle", "agg-straddle", 1)
	if _, _, err := w.st.Tick(ctx, w.leases.Tokens()); err != nil {
		t.Fatal(err)
	}
	// Every shard's (empty) window now starts at that tick, whose xip list holds tx:
	// after its commit, part 2 of every shard has an id to probe.
	if _, err := f.db.Exec(closeIdleSQL(f.tb), 1<<40, pq.Array(w.leases.Tokens())); err != nil {
		t.Fatal(err)
	}
	commit(t, tx)
	f.insert(f.db, "after", "agg-after", 1)
	if _, _, err := w.st.Tick(ctx, w.leases.Tokens()); err != nil {
		t.Fatal(err)
	}

	conn, tokens := preparedRead(t, f, w)
	plans := map[string]string{"read": explain(t, conn, `EXPLAIN (ANALYZE) EXECUTE rd(`+tokens+`, 500, 0)`)}
	// The idle close as Tick runs it: with parameters, in a transaction planned as the read.
	if err := w.st.inReadPlannerTx(ctx, "idle close", func(tx *sql.Tx) error {
		plans["idle close"] = explain(t, tx, `EXPLAIN (ANALYZE) `+closeIdleSQL(f.tb), int64(1000000), pq.Array(w.leases.Tokens()))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for name, plan := range plans {
		if strings.Contains(plan, "JIT:") {
			t.Errorf("%s: compiled with JIT (hundreds of milliseconds per call for a read of 2 ms):\n%s", name, plan)
		}
		bounded, bad := outboxScans(plan)
		if len(bad) > 0 || bounded < 2 {
			t.Errorf("%s: scans of the outbox table not bounded by seq or txid: %q (bounded: %d, want part 1's and part 2's):\n%s",
				name, bad, bounded, plan)
		}
	}
	if b, err := w.st.Read(ctx, w.leases.Tokens(), 0, 500); err != nil || len(b.Events) != 2 {
		t.Fatalf("read after the straddling commit: %d events, %v; want straddle and after", len(b.Events), err)
	}
}

// explain returns q's plan as text.
// preparedRead is a connection set up as the read connection (ReadSettings) with the
// read prepared as rd($1 tokens, $2 batch size, $3 first shard), and w's tokens as an
// SQL array literal.
func preparedRead(t *testing.T, f *fixture, w *worker) (*sql.Conn, string) {
	t.Helper()
	conn, err := f.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	for _, q := range ReadSettings {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.ExecContext(ctx, `PREPARE rd(text[], int, int) AS `+readSQL(f.tb, f.n)); err != nil {
		t.Fatal(err)
	}
	return conn, "ARRAY['" + strings.Join(w.leases.Tokens(), "','") + "']"
}

// The read's generic plan is made at the connection's first read, when the cursor log
// may hold one row per shard (and statistics that say so); the log then grows between
// trims, and while a long transaction elsewhere keeps what the trims deleted. With
// ReadSettings the plan probes each shard's newest cursor row by the log's primary
// key: at the default random_page_cost it scanned the log once per shard, and every
// read cost the log's size times the shards held (the drain's reads: 3.5 -> 9.2 ms).
func TestReadProbesTheCursorLogByItsKeyAfterItGrew(t *testing.T) {
	forShardCounts(t, testReadProbesTheCursorLogByItsKeyAfterItGrew)
}

func testReadProbesTheCursorLogByItsKeyAfterItGrew(t *testing.T, n int) {
	f := newFixture(t, n)
	w := f.worker("w")
	w.rebalance()
	// As after the bench's bulk load: statistics that say one row per shard.
	if _, err := f.db.Exec(`VACUUM ANALYZE ob_cursor, ob_lease, ob_tick`); err != nil {
		t.Fatal(err)
	}
	conn, tokens := preparedRead(t, f, w)
	if _, err := conn.ExecContext(ctx, `EXECUTE rd(`+tokens+`, 500, 0)`); err != nil { // the generic plan is made now
		t.Fatal(err)
	}
	if _, err := f.db.Exec(`INSERT INTO ob_cursor (shard, lo_tick) SELECT g % $1, 1 FROM generate_series(1, 100000) g`, n); err != nil {
		t.Fatal(err)
	}
	plan := explain(t, conn, `EXPLAIN EXECUTE rd(`+tokens+`, 500, 0)`)
	if !strings.Contains(plan, "Index Scan Backward using ob_cursor_pkey on ob_cursor") || strings.Contains(plan, "Seq Scan on ob_cursor") {
		t.Fatalf("the read does not probe the cursor log by its primary key:\n%s", plan)
	}
}

// TestHousekeepingProbesTheNewestCursorByItsKey: while a transaction elsewhere keeps
// what the trims delete, the cursor log holds many rows per shard and its statistics
// say one. The statements that probe every held shard's newest cursor outside the
// read (the idle close, the trims, the lease state) must still probe it by the
// primary key, not read all of the shard's rows with a bitmap scan and sort them
// (320-360 ms instead of 1.2 ms for 256 shards of 2,700 rows each). They run in
// inReadPlannerTx; checked on their plans there.
func TestHousekeepingProbesTheNewestCursorByItsKey(t *testing.T) {
	forShardCounts(t, testHousekeepingProbesTheNewestCursorByItsKey)
}

func testHousekeepingProbesTheNewestCursorByItsKey(t *testing.T, n int) {
	f := newFixture(t, n)
	w := f.worker("w")
	w.rebalance()
	open, err := f.db.Begin() // keeps the deleted rows from being pruned
	if err != nil {
		t.Fatal(err)
	}
	defer open.Rollback() //nolint:errcheck
	if _, err := open.Exec(`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; SELECT 1`); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		if _, err := f.db.Exec(`INSERT INTO ob_cursor (shard, lo_tick) SELECT shard, lo_tick FROM ob_shard`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.db.Exec(`DELETE FROM ob_cursor c WHERE c.id < (SELECT max(id) FROM ob_cursor d WHERE d.shard = c.shard)`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec(`ANALYZE ob_cursor`); err != nil {
		t.Fatal(err)
	}
	tokens := pq.Array(w.leases.Tokens())
	for _, c := range []struct {
		name, sql string
		args      []any
	}{
		{"idle close", closeIdleSQL(f.tb), []any{int64(1) << 40, tokens}},
		{"least lo_tick", leastLoTickSQL(f.tb), nil},
		{"cursor trim", trimCursorsSQL(f.tb), []any{tokens, pq.Array([]int64{}), pq.Array([]int64{})}},
		{"lease state", leaseStateSQL(f.tb), []any{w.st.interval()}},
	} {
		var plan string
		if err := w.st.inReadPlannerTx(ctx, c.name, func(tx *sql.Tx) error {
			plan = explain(t, tx, `EXPLAIN `+c.sql, c.args...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !newestProbe.MatchString(plan) || strings.Contains(plan, "Bitmap Heap Scan on ob_cursor") {
			t.Errorf("%s does not probe the newest cursor by the primary key:\n%s", c.name, plan)
		}
		if without := explain(t, f.db, `EXPLAIN `+c.sql, c.args...); strings.Contains(without, "Bitmap Heap Scan on ob_cursor") {
			t.Logf("%s planned without the read's settings: a bitmap scan of the cursor log (the case this test is for)", c.name)
		}
	}
}

// queryer is a connection, a pool or a transaction.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func explain(t *testing.T, conn queryer, q string, args ...any) string {
	t.Helper()
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		b.WriteString(l + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

var (
	newestProbe = regexp.MustCompile(`Index (Only )?Scan Backward using ob_cursor_pkey on ob_cursor`)
	outboxScan  = regexp.MustCompile(`(Seq Scan on ob |Index (Only )?Scan using ob_\w+ on ob |Bitmap Index Scan on ob_(seq|txid)_idx)`)
	boundedBy   = regexp.MustCompile(`Index Cond: .*(txid = |seq > )`)
)

// outboxScans counts the plan's scans of the outbox table that ran (not "never
// executed") with an index condition on a seq range or a txid, and returns the
// others.
func outboxScans(plan string) (bounded int, bad []string) {
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
		if boundedBy.MatchString(cond) {
			bounded++
		} else {
			bad = append(bad, strings.TrimSpace(l)+" / "+strings.TrimSpace(cond))
		}
	}
	return bounded, bad
}
