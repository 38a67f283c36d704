package outboxstats

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardstore"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// v2fix is a migrated v2 table and one relay worker driving it through the shard
// store's API, as the v2 relay loop does: Tick, Read, publish, PlanHolds, Advance.
type v2fix struct {
	t      *testing.T
	dsn    string
	db     *sql.DB // the operator's pool: Read runs on it
	tb     pgident.Table
	n      int
	st     *shardstore.Store
	leases shardstore.Leases
	next   int16
	// outcome decides an event's publish result (nil: sent).
	outcome func(e shardstore.Event) shardstore.Result
	batches int
}

var bg = context.Background()

func newV2(t *testing.T, shards int) *v2fix {
	t.Helper()
	dsn, db := srv.OpenDatabase(t)
	tb, _ := pgident.NewTable("public", "ob")
	if err := schema.MigrateV2(bg, db, tb, schema.V2Options{Shards: shards}); err != nil {
		t.Fatal(err)
	}
	pool, err := sql.Open("postgres", dsn) // the relay's own pool
	if err != nil {
		t.Fatal(err)
	}
	st, err := shardstore.New(pool, shardstore.Options{Table: tb, Shards: shards, WorkerID: "w1", Lease: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close(); _ = pool.Close() })
	return &v2fix{t: t, dsn: dsn, db: db, tb: tb, n: shards, st: st}
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insert is a producer's plain INSERT.
func (f *v2fix) insert(q execer, id, agg string, version int) {
	f.t.Helper()
	if _, err := q.ExecContext(bg, `INSERT INTO ob VALUES ($1, 'order', $2, $3, 'order.changed', 1, 'orders', $2, '{}')`,
		id, agg, version); err != nil {
		f.t.Fatalf("insert %s: %v", id, err)
	}
}

func (f *v2fix) stats() Stats {
	f.t.Helper()
	s, err := Read(bg, f.db, f.tb)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func (f *v2fix) rebalance() {
	f.t.Helper()
	if _, err := f.st.Rebalance(bg, &f.leases); err != nil {
		f.t.Fatal(err)
	}
}

func (f *v2fix) tick() bool {
	f.t.Helper()
	_, rec, err := f.st.Tick(bg, f.leases.Tokens())
	if err != nil {
		f.t.Fatal(err)
	}
	return rec
}

// batch reads up to limit events, "publishes" them (f.outcome) and advances; it
// returns the events read (0: every window is empty).
func (f *v2fix) batch(limit int) []shardstore.Event {
	f.t.Helper()
	b, err := f.st.Read(bg, f.leases.Tokens(), f.next, limit)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(b.Windows) == 0 {
		return nil
	}
	results := make([]shardstore.Result, len(b.Events))
	a := shardstore.Advance{Windows: b.Windows}
	stopped := map[shardstore.AggregateKey]bool{}
	for i, e := range b.Events {
		results[i] = shardstore.Result{Outcome: shardstore.Sent}
		switch {
		case e.Held || stopped[e.Key()]:
			results[i] = shardstore.Result{Outcome: shardstore.Unsent}
		case f.outcome != nil:
			results[i] = f.outcome(e)
		}
		switch results[i].Outcome {
		case shardstore.Sent:
			a.Partitions, a.Offsets = append(a.Partitions, int32(e.Shard)%3), append(a.Offsets, e.Seq)
			a.Seqs = append(a.Seqs, e.Seq)
		case shardstore.Failed, shardstore.Unsent:
			stopped[e.Key()] = true
		}
	}
	a.Holds = shardstore.PlanHolds(b.Events, results, 3)
	adv, err := f.st.Advance(bg, a)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(adv.Shards) != len(b.Windows) {
		f.t.Fatalf("advance moved %d of %d shards", len(adv.Shards), len(b.Windows))
	}
	f.next = b.Next
	f.batches++
	return b.Events
}

// drain reads until caught up (a read finds nothing and no tick is needed) and
// returns how many events it read.
func (f *v2fix) drain(limit int) int {
	f.t.Helper()
	n := 0
	for range 100000 {
		if evs := f.batch(limit); len(evs) > 0 {
			n += len(evs)
			continue
		}
		if !f.tick() {
			return n
		}
	}
	f.t.Fatal("drain did not finish")
	return n
}

func (f *v2fix) exec(q string, args ...any) {
	f.t.Helper()
	if _, err := f.db.Exec(q, args...); err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
}

func (f *v2fix) count(q string, args ...any) int64 {
	f.t.Helper()
	var n int64
	if err := f.db.QueryRow(q, args...).Scan(&n); err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// conn is a connection of its own (a producer, or a long transaction elsewhere).
func (f *v2fix) conn() *sql.Conn {
	f.t.Helper()
	c, err := f.db.Conn(bg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = c.Close() })
	return c
}

func near(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if d := got.Sub(want); d < -time.Millisecond || d > time.Millisecond {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// TestReadV2 follows one table through the relay's steps and checks every field at
// each: a fresh table, events nobody relayed yet (no tick: pending all the same),
// leases taken, a batch with a failed, a held and a rejected event, and the retry
// sent.
func TestReadV2(t *testing.T) {
	f := newV2(t, 8)
	if s := f.stats(); s != (Stats{Contract: schema.Contract{Version: schema.ContractV2, Shards: 8}}) {
		t.Fatalf("empty table: %+v", s)
	}
	for i, agg := range []string{"a", "b", "c", "d", "e"} {
		f.insert(f.db, "ev-"+agg+"-1", agg, 1)
		if i == 0 {
			f.insert(f.db, "ev-a-2", "a", 2)
		}
	}
	f.exec(`UPDATE ob SET created_at = now() - interval '10 minutes' WHERE event_id = 'ev-c-1'`) // a test's clock, not a relay's
	oldest := func(q string) time.Time {
		var at time.Time
		if err := f.db.QueryRow(q).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	// No relay ran: no tick since the migrate, so no window the relay could read yet
	// holds them, but they are pending all the same.
	s := f.stats()
	if s.Pending != 6 || s.Sending != 0 || s.ExpiredLeases != 0 || s.Retrying != 0 || s.Dead != 0 || !s.LastPublish.IsZero() || s.PendingEstimated {
		t.Fatalf("before the relay: %+v", s)
	}
	near(t, "oldest pending", s.OldestPending, oldest(`SELECT created_at FROM ob WHERE event_id = 'ev-c-1'`))

	// The worker takes every shard: those with events are Sending.
	f.rebalance()
	busy := f.count(`SELECT count(DISTINCT shard) FROM ob`)
	if s = f.stats(); s.Pending != 6 || s.Sending != busy || s.ExpiredLeases != 0 {
		t.Fatalf("leased: %+v (busy shards %d)", s, busy)
	}

	// One batch of everything: a-1 fails (RETRY, a-2 HELD behind it), b-1 is rejected
	// (DEAD), the rest are sent.
	f.outcome = func(e shardstore.Event) shardstore.Result {
		switch e.EventID {
		case "ev-a-1":
			return shardstore.Result{Outcome: shardstore.Failed, Code: "BROKER", RetryIn: time.Hour}
		case "ev-b-1":
			return shardstore.Result{Outcome: shardstore.Rejected, Code: "TOO_LARGE"}
		}
		return shardstore.Result{Outcome: shardstore.Sent}
	}
	f.tick()
	if evs := f.batch(100); len(evs) != 6 {
		t.Fatalf("read %d events", len(evs))
	}
	s = f.stats()
	if s.Pending != 1 || s.Retrying != 1 || s.Dead != 1 || s.Sending != 0 || s.ExpiredLeases != 0 {
		t.Fatalf("after the batch: %+v", s)
	}
	near(t, "oldest pending (the hold rows)", s.OldestPending, oldest(`SELECT min(created_at) FROM ob WHERE aggregate_id = 'a'`))
	near(t, "last publish", s.LastPublish, oldest(`SELECT at FROM ob_batch ORDER BY batch DESC LIMIT 1`))

	// A new version of the held aggregate: read, not published (held behind a-1), so
	// the batch log row of its advance published nothing and last publish stays.
	lastPublish := s.LastPublish
	f.insert(f.db, "ev-a-3", "a", 3)
	if s = f.stats(); s.Pending != 2 || s.Retrying != 1 || s.Sending != 1 {
		t.Fatalf("a-3 in its window: %+v", s)
	}
	f.outcome = nil
	f.tick()
	if got := f.drain(100); got != 1 {
		t.Fatalf("read %d", got)
	}
	if s = f.stats(); s.Pending != 2 || s.Retrying != 1 || !s.LastPublish.Equal(lastPublish) {
		t.Fatalf("a-3 held: %+v (last publish was %v)", s, lastPublish)
	}
	f.insert(f.db, "ev-f-1", "f", 1)
	if s = f.stats(); s.Pending != 3 {
		t.Fatalf("f-1 in its window: %+v", s)
	}
	f.tick()
	f.drain(100)
	if s = f.stats(); s.Pending != 2 || !s.LastPublish.After(lastPublish) {
		t.Fatalf("f-1 sent: %+v", s)
	}
	lastPublish = s.LastPublish
	f.exec(`UPDATE ob_hold SET next_attempt_at = now() WHERE state = 'RETRY'`) // its backoff is over
	for range 3 {                                                              // a-1, then a-2 and a-3 once it is gone
		due, err := f.st.DueHolds(bg, f.leases.Tokens(), 100)
		if err != nil {
			t.Fatal(err)
		}
		var st []shardstore.Settlement
		for _, h := range due {
			if x, ok := shardstore.Transition(h, shardstore.Result{Outcome: shardstore.Sent}, 3); ok {
				st = append(st, x)
			}
		}
		if _, err := f.st.Settle(bg, st); err != nil {
			t.Fatal(err)
		}
	}
	s = f.stats()
	if s.Pending != 0 || s.Retrying != 0 || s.Dead != 1 || !s.OldestPending.IsZero() || !s.LastPublish.Equal(lastPublish) {
		t.Fatalf("retry sent: %+v", s)
	}

	// A worker that stopped renewing: its shards' leases ended (the relay's own clock
	// is the database's; the test moves lease_until instead of waiting a lease).
	f.exec(`UPDATE ob_lease SET owner = 'gone/1' WHERE shard < 3`)
	f.exec(`INSERT INTO ob_token (token, lease_until) VALUES ('gone/1', now() - interval '1 second')`)
	if s = f.stats(); s.ExpiredLeases != 3 {
		t.Fatalf("expired leases: %+v", s)
	}
	f.exec(`UPDATE ob_lease SET owner = NULL WHERE owner = 'gone/1'`)
	if err := f.st.ReleaseAll(bg, &f.leases); err != nil {
		t.Fatal(err)
	}
	if s = f.stats(); s.ExpiredLeases != 0 || s.Sending != 0 {
		t.Fatalf("released: %+v", s)
	}
}

// TestReadV2WindowInParts: a shard whose window is read in parts (pos, hi_tick
// fixed) counts the rest of that window and the next one, (hi_tick, now], and
// Pending is exactly what the relay then reads.
func TestReadV2WindowInParts(t *testing.T) {
	f := newV2(t, 4)
	f.rebalance()
	for v := 1; v <= 20; v++ {
		f.insert(f.db, "x-"+itoa(v), "x", v)
	}
	f.tick()
	if evs := f.batch(7); len(evs) != 7 {
		t.Fatalf("first part: %d", len(evs))
	}
	if f.count(`SELECT count(*) FROM ob_shard WHERE pos IS NOT NULL AND hi_tick IS NOT NULL`) != 1 {
		t.Fatal("the window is not read in parts")
	}
	// Rows after the fixed hi_tick: one of a transaction that was running when the
	// next tick was taken and commits after it, and one committed plainly (after the
	// other took its id: so that id is below the tick snapshot's xmax, and in its xip
	// list).
	late := f.conn()
	if _, err := late.ExecContext(bg, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	f.insert(late, "y-1", "y", 1)
	f.insert(f.db, "x-21", "x", 21)
	if s := f.stats(); s.Pending != 14 || s.Sending != 1 {
		t.Fatalf("in parts: %+v", s)
	}
	f.tick() // y-1's transaction is in this tick's xip list
	if _, err := late.ExecContext(bg, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	s := f.stats()
	if s.Pending != 15 || s.PendingEstimated {
		t.Fatalf("after the late commit: %+v", s)
	}
	if got := f.drain(5); int64(got) != s.Pending {
		t.Fatalf("status said %d pending, the relay read %d", s.Pending, got)
	}
	if s = f.stats(); s.Pending != 0 || s.Sending != 0 || !s.OldestPending.IsZero() {
		t.Fatalf("drained: %+v", s)
	}
}

// TestReadV2LongTransactionElsewhere: a long transaction elsewhere neither hides
// events committed after it began (the stall of a txid < xmin cursor) nor inflates
// Pending (it has no rows, or rows not committed yet); its own rows count once it
// commits, with a txid and seq below rows already published.
func TestReadV2LongTransactionElsewhere(t *testing.T) {
	f := newV2(t, 8)
	f.rebalance()
	idle := f.conn() // holds a transaction id and writes nothing
	if _, err := idle.ExecContext(bg, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	if _, err := idle.ExecContext(bg, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	writer := f.conn() // inserts, commits much later
	if _, err := writer.ExecContext(bg, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		f.insert(writer, "long-"+itoa(i), "long-"+itoa(i), 1)
	}
	for i := range 5 {
		f.insert(f.db, "ev-"+itoa(i), "agg-"+itoa(i), 1)
	}
	if s := f.stats(); s.Pending != 5 {
		t.Fatalf("hidden or inflated by the open transactions: %+v", s)
	}
	if got := f.drain(100); got != 5 {
		t.Fatalf("relay read %d", got)
	}
	if s := f.stats(); s.Pending != 0 || !s.OldestPending.IsZero() {
		t.Fatalf("caught up, the long transactions still open: %+v", s)
	}
	if _, err := writer.ExecContext(bg, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	s := f.stats()
	if s.Pending != 3 {
		t.Fatalf("the long transaction's rows after its commit: %+v", s)
	}
	near(t, "oldest pending", s.OldestPending, func() time.Time {
		var at time.Time
		if err := f.db.QueryRow(`SELECT min(created_at) FROM ob WHERE event_id LIKE 'long-%'`).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}())
	if got := f.drain(100); got != 3 {
		t.Fatalf("relay read %d of the long transaction's 3", got)
	}
	if s := f.stats(); s.Pending != 0 {
		t.Fatalf("drained: %+v", s)
	}
	if _, err := idle.ExecContext(bg, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
}

// TestReadV2TransactionAboveTickXmax: a producer that took the newest id (at or above
// the snapshot's xmax, so not in PostgreSQL's xip list), drew its seq before a tick
// and commits after it is counted pending and then read. The status counts with the
// relay's window predicate, so before the tick named such ids (schema.TickSnapshot)
// its row was neither read nor counted once the shard's window closed at that tick.
func TestReadV2TransactionAboveTickXmax(t *testing.T) {
	f := newV2(t, 1)
	f.rebalance()
	early, late := f.conn(), f.conn()
	for _, c := range []*sql.Conn{early, late} {
		if _, err := c.ExecContext(bg, `BEGIN`); err != nil {
			t.Fatal(err)
		}
	}
	f.insert(early, "early", "early", 1)
	f.insert(late, "late", "late", 1) // the newest id; nothing newer completes before the tick
	if _, err := early.ExecContext(bg, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	f.tick() // xmax = late's id: late is invisible and not in xip
	if got := f.drain(100); got != 1 {
		t.Fatalf("read %d", got)
	}
	if _, err := late.ExecContext(bg, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	if s := f.stats(); s.Pending != 1 {
		t.Errorf("late's committed row is not pending: %+v", s)
	}
	f.insert(f.db, "after", "after", 1)
	f.tick()
	if got := f.drain(100); got != 2 {
		t.Errorf("the relay read %d of late's and the next event", got)
	}
}

// TestReadV2CapsTheCount: past the per-shard cap the count is extrapolated, within a
// few percent, and says so.
func TestReadV2CapsTheCount(t *testing.T) {
	f := newV2(t, 2048) // cap 32 rows per shard and part
	f.exec(`INSERT INTO ob (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload)
SELECT 'e-' || g, 'order', 'o-' || (g % 5000), g, 'order.changed', 'orders', 'o-' || (g % 5000), '{}' FROM generate_series(1, 200000) g`)
	s := f.stats()
	if !s.PendingEstimated || s.Pending < 190000 || s.Pending > 210000 {
		t.Fatalf("estimate of 200000: %+v", s)
	}
	t.Logf("200,000 pending over 2048 shards, counted up to %d per shard: %d", shardCountCap(2048), s.Pending)
}

// TestContractCachedAndRedetected: the contract is detected once per pool and
// table; a table dropped and created again under another contract is detected
// afresh on the next read.
func TestContractCachedAndRedetected(t *testing.T) {
	_, db := srv.OpenDatabase(t)
	tb, _ := pgident.NewTable("public", "ob")
	if err := schema.Migrate(bg, db, tb, schema.Options{}); err != nil {
		t.Fatal(err)
	}
	before := detections.Load()
	for range 3 {
		if _, err := Read(bg, db, tb); err != nil {
			t.Fatal(err)
		}
	}
	if n := detections.Load() - before; n != 1 {
		t.Fatalf("3 reads detected the contract %d times", n)
	}
	if c, ok := contracts.get(db, tb); !ok || c.Version != schema.ContractV1 {
		t.Fatalf("cached %+v %v", c, ok)
	}
	if _, err := db.Exec(`DROP TABLE ob CASCADE`); err != nil {
		t.Fatal(err)
	}
	if err := schema.MigrateV2(bg, db, tb, schema.V2Options{Shards: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO ob VALUES ('e1', 'order', 'o1', 1, 'order.changed', 1, 'orders', 'o1', '{}')`); err != nil {
		t.Fatal(err)
	}
	s, err := Read(bg, db, tb)
	if err != nil || s.Pending != 1 {
		t.Fatalf("after the table became v2: %+v %v", s, err)
	}
	if c, _ := contracts.get(db, tb); c.Version != schema.ContractV2 || c.Shards != 4 {
		t.Fatalf("cached %+v", c)
	}
	if _, err := db.Exec(`DROP TABLE ob CASCADE`); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(bg, db, tb); err == nil || !isMissing(err) {
		t.Fatalf("dropped: %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func isMissing(err error) bool { return errors.Is(err, ErrTableMissing) }

// explainWindows runs the windows count under EXPLAIN ANALYZE in a transaction set up
// as Read's, and returns the plan.
func (f *v2fix) explainWindows() string {
	f.t.Helper()
	tx, err := f.db.BeginTx(bg, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		f.t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	if _, err := tx.Exec(v2Settings); err != nil {
		f.t.Fatal(err)
	}
	rows, err := tx.Query(`EXPLAIN (ANALYZE, BUFFERS) `+v2WindowsSQL(f.tb), shardCountCap(f.n))
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return strings.Join(out, "\n")
}

// TestReadV2Cost measures Read on a v2 table of OUTBOXSTATS_V2_ROWS rows (default
// 100,000; docs/contract-v2.md reports 1,000,000) over 32 and 256 shards, with every row
// pending (no relay ever ran: the largest windows there are) and after the relay
// caught up with 100 new events, and checks that the window count reads the outbox
// table only through its (shard, seq) and (shard, txid) indexes, bounded by a seq
// range or a txid.
func TestReadV2Cost(t *testing.T) {
	for _, n := range []int{32, 256} { // fewer shards: larger estimates per (shard, txid) probe
		t.Run(strconv.Itoa(n)+" shards", func(t *testing.T) { testReadV2Cost(t, n) })
	}
}

func testReadV2Cost(t *testing.T, shards int) {
	rows := 100000
	if v := os.Getenv("OUTBOXSTATS_V2_ROWS"); v != "" {
		var err error
		if rows, err = strconv.Atoi(v); err != nil || rows < 1000 {
			t.Fatalf("OUTBOXSTATS_V2_ROWS=%q", v)
		}
	}
	f := newV2(t, shards)
	start := time.Now()
	for from := 0; from < rows; from += 100000 { // 100,000-row transactions
		f.exec(`INSERT INTO ob (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload, headers)
SELECT 'e-' || g, 'order', 'o-' || (g % 10000), g, 'order.changed', 'orders', 'o-' || (g % 10000),
       jsonb_build_object('orderId', 'o-' || (g % 10000), 'amount', g, 'note', repeat('x', 200)),
       CASE WHEN g % 2 = 0 THEN '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}'::jsonb END
FROM generate_series($1::int + 1, least($1::int + 100000, $2::int)) g`, from, rows)
	}
	f.exec(`VACUUM ANALYZE ob`)
	t.Logf("loaded %d rows in %s", rows, time.Since(start).Round(time.Millisecond))

	plan := f.explainWindows()
	checkPlan(t, plan)
	t.Logf("all pending, plan:\n%s", plan)
	s, cold, warm := f.timedStats()
	if !s.PendingEstimated && rows > PendingCountBudget || s.Pending < int64(rows)*95/100 || s.Pending > int64(rows)*105/100 {
		t.Fatalf("%d pending: %+v", rows, s)
	}
	t.Logf("%d rows, all pending: Read %s first, %s median of 5 after; pending %d (estimated %v); windows count under EXPLAIN: %s",
		rows, cold, warm, s.Pending, s.PendingEstimated, planSummary(plan))

	f.rebalance()
	f.tick()
	start = time.Now()
	if got := f.drain(10000); got != rows {
		t.Fatalf("relay read %d of %d", got, rows)
	}
	t.Logf("relay drained %d rows in %s (%d batches)", rows, time.Since(start).Round(time.Millisecond), f.batches)
	for i := range 100 {
		f.insert(f.db, "new-"+itoa(i), "new-"+itoa(i), 1)
	}
	f.exec(`ANALYZE ob`)
	plan = f.explainWindows()
	checkPlan(t, plan)
	s, cold, warm = f.timedStats()
	if s.Pending != 100 || s.PendingEstimated {
		t.Fatalf("caught up, 100 new: %+v", s)
	}
	t.Logf("%d rows published, 100 pending: Read %s first, %s median of 5 after; windows count under EXPLAIN: %s",
		rows, cold, warm, planSummary(plan))
}

// seqScanOfOutbox: a sequential or bitmap scan of the outbox table itself (the side
// tables, ob_shard and ob_tick, are small and read whole).
var seqScanOfOutbox = regexp.MustCompile(`(Seq Scan|Bitmap Heap Scan) on ob o`)

func checkPlan(t *testing.T, plan string) {
	t.Helper()
	if seqScanOfOutbox.MatchString(plan) || !strings.Contains(plan, "Index Scan using ob_seq_idx on ob o") {
		t.Fatalf("the window count does not read ob through (shard, seq):\n%s", plan)
	}
	if _, _, bad := outboxScans(plan); len(bad) > 0 {
		t.Fatalf("the window count walks shards' history (scans not bounded by seq or txid: %q):\n%s", bad, plan)
	}
}

// timedStats reads the status once, then five more times; it returns the last
// snapshot, the first read's time and the median of the others.
func (f *v2fix) timedStats() (Stats, time.Duration, time.Duration) {
	f.t.Helper()
	start := time.Now()
	s := f.stats()
	first := time.Since(start)
	var ds []time.Duration
	for range 5 {
		start = time.Now()
		s = f.stats()
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	if first > Timeout/2 || ds[2] > Timeout/2 {
		f.t.Fatalf("Read took %s (first) and %s (median): more than half its timeout", first, ds[2])
	}
	return s, first.Round(100 * time.Microsecond), ds[2].Round(100 * time.Microsecond)
}
