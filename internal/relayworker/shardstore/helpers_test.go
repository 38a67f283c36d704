package shardstore

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
)

var srv *pgtest.Server

// The server allows prepared transactions: a producer's prepared transaction is one
// of the cases the window read must get right.
func TestMain(m *testing.M) {
	pgtest.MainWith(m, &srv, pgtest.Options{Settings: pgtest.PreparedTransactions})
}

var ctx = context.Background()

// fixture is a migrated v2 table in a database of its own.
type fixture struct {
	t   *testing.T
	dsn string
	db  *sql.DB
	tb  pgident.Table
	n   int
}

func newFixture(t *testing.T, shards int) *fixture {
	t.Helper()
	dsn, db := srv.OpenDatabase(t)
	tb, _ := pgident.NewTable("public", "ob")
	if err := schema.MigrateV2(ctx, db, tb, schema.V2Options{Shards: shards}); err != nil {
		t.Fatal(err)
	}
	if _, err := schema.VerifyV2(ctx, db, tb, shards); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, dsn: dsn, db: db, tb: tb, n: shards}
}

// worker is a Store with a pool of its own (as a relay process has) and its leases.
func (f *fixture) worker(id string) *worker {
	f.t.Helper()
	pool, err := sql.Open("postgres", f.dsn)
	if err != nil {
		f.t.Fatal(err)
	}
	st, err := New(pool, Options{Table: f.tb, Shards: f.n, WorkerID: id, Lease: 30 * time.Second})
	if err != nil {
		f.t.Fatal(err)
	}
	st.housekeepEvery = 0 // by ticks alone: the tests tick faster than HousekeepEvery
	w := &worker{f: f, id: id, st: st, pool: pool}
	f.t.Cleanup(w.close)
	return w
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insert is a producer's plain INSERT of the nine producer columns.
func (f *fixture) insert(q execer, id, agg string, version int) {
	f.t.Helper()
	if _, err := q.ExecContext(ctx, `INSERT INTO ob VALUES ($1, 'order', $2, $3, 'order.changed', 1, 'orders', $2, '{"a":1}')`,
		id, agg, version); err != nil {
		f.t.Fatalf("insert %s: %v", id, err)
	}
}

// sameShard returns n aggregate ids of type order that hash to one shard.
func (f *fixture) sameShard(n int) []string {
	f.t.Helper()
	rows, err := f.db.Query(`SELECT 'agg-' || g FROM generate_series(1, 100000) g
WHERE (hashtextextended('order/agg-' || g, 0) & $1) = (hashtextextended('order/agg-1', 0) & $1) ORDER BY g LIMIT $2`, f.n-1, n)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil || len(out) != n {
		f.t.Fatalf("same-shard aggregates: %v, %v", out, err)
	}
	return out
}

// worker runs the relay loop's statements the way the v2 relay will: read, "publish"
// (append to its log, unless fail says otherwise), PlanHolds, advance; and the due
// hold rows: publish, Transition, settle.
type worker struct {
	f      *fixture
	id     string
	st     *Store
	pool   *sql.DB
	leases Leases
	next   int16
	// fail decides an event's outcome (nil: every event is sent).
	fail func(e Event) Result
	// published is every event "published", in publish order.
	published []Event
}

func (w *worker) close() {
	_ = w.st.Close()
	_ = w.pool.Close()
}

func (w *worker) rebalance() LeasePlan {
	w.f.t.Helper()
	p, err := w.st.Rebalance(ctx, &w.leases)
	if err != nil {
		w.f.t.Fatal(err)
	}
	return p
}

func (w *worker) outcome(e Event) Result {
	if w.fail == nil {
		return Result{Outcome: Sent}
	}
	return w.fail(e)
}

// batch reads and publishes one batch and advances it; it returns the batch, the
// advance's answer, and whether there was anything to advance.
func (w *worker) batch(limit int) (Batch, Advanced, bool) {
	w.f.t.Helper()
	b, err := w.st.Read(ctx, w.leases.Tokens(), w.next, limit)
	if err != nil {
		w.f.t.Fatal(err)
	}
	if len(b.Windows) == 0 {
		return b, Advanced{}, false
	}
	for _, e := range b.Events {
		// Age is the server's now() at the read less created_at: never negative (the
		// row committed before the read's snapshot), and small in these tests.
		if e.Age < 0 || e.Age > time.Minute || e.CreatedAt.IsZero() {
			w.f.t.Fatalf("event %s: age %s, created_at %s", e.EventID, e.Age, e.CreatedAt)
		}
	}
	b, adv := w.publishAndAdvance(b)
	return b, adv, true
}

func (w *worker) publishAndAdvance(b Batch) (Batch, Advanced) {
	w.f.t.Helper()
	results := make([]Result, len(b.Events))
	a := Advance{Windows: b.Windows}
	stopped := map[AggregateKey]bool{} // the relay never publishes past a failed version
	for i, e := range b.Events {
		if e.Held || stopped[e.Key()] {
			results[i] = Result{Outcome: Unsent}
			continue
		}
		results[i] = w.outcome(e)
		if results[i].Outcome == Failed {
			stopped[e.Key()] = true
		}
		if results[i].Outcome == Sent {
			w.published = append(w.published, e)
			a.Partitions, a.Offsets = append(a.Partitions, int32(e.Shard)%3), append(a.Offsets, e.Seq)
			a.Seqs = append(a.Seqs, e.Seq)
		}
	}
	a.Holds = PlanHolds(b.Events, results, 3)
	adv, err := w.st.Advance(ctx, a)
	if err != nil {
		w.f.t.Fatal(err)
	}
	w.leases.Drop(lost(b.Windows, append(adv.Shards, adv.Stale...))...)
	w.next = b.Next
	return b, adv
}

// lost are the windows' shards the advance did not move.
func lost(ws []Window, moved []int16) []int16 {
	m := map[int16]bool{}
	for _, s := range moved {
		m[s] = true
	}
	var out []int16
	for _, w := range ws {
		if !m[w.Shard] {
			out = append(out, w.Shard)
		}
	}
	return out
}

// drain reads, publishes and advances until caught up: a read finds nothing and no
// tick is needed.
func (w *worker) drain(limit int) {
	w.f.t.Helper()
	for range 100000 {
		if _, _, any := w.batch(limit); any {
			continue
		}
		_, rec, err := w.st.Tick(ctx, w.leases.Tokens())
		w.st.background.Wait() // the trims Tick started, so the test sees what they left
		if err != nil {
			w.f.t.Fatal(err)
		} else if !rec {
			return
		}
	}
	w.f.t.Fatal("drain did not finish")
}

// holds publishes the due hold rows once (in their order, an aggregate stopping at its
// first failure) and settles them.
func (w *worker) holds() int {
	w.f.t.Helper()
	rows, err := w.st.DueHolds(ctx, w.leases.Tokens(), 100)
	if err != nil {
		w.f.t.Fatal(err)
	}
	var st []Settlement
	stopped := map[AggregateKey]bool{}
	for _, h := range rows {
		r := Result{Outcome: Unsent}
		if !stopped[h.Key()] {
			r = w.outcome(h.Event)
		}
		if r.Outcome == Sent {
			w.published = append(w.published, h.Event)
		} else if r.Outcome != Rejected {
			stopped[h.Key()] = true
		}
		if s, ok := Transition(h, r, 3); ok {
			st = append(st, s)
		}
	}
	n, err := w.st.Settle(ctx, st)
	if err != nil {
		w.f.t.Fatal(err)
	}
	if n != len(st) {
		w.f.t.Fatalf("settled %d of %d hold rows", n, len(st))
	}
	return len(rows)
}

// ids are event ids in order.
func ids(es []Event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.EventID
	}
	return out
}

// checkDelivery asserts lost = 0 (every event of the table but those in want-not was
// published at least once) and per-aggregate order: for each aggregate the versions,
// in publish order and leaving out re-publications of a version already published,
// ascend.
func (f *fixture) checkDelivery(published []Event, exceptDead ...string) {
	f.t.Helper()
	dead := map[string]bool{}
	for _, id := range exceptDead {
		dead[id] = true
	}
	rows, err := f.db.Query(`SELECT event_id FROM ob ORDER BY event_id`)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	seen := map[string]bool{}
	for _, e := range published {
		seen[e.EventID] = true
	}
	var missing []string
	total := 0
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			f.t.Fatal(err)
		}
		total++
		if !seen[id] && !dead[id] {
			missing = append(missing, id)
		}
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	if len(missing) > 0 {
		f.t.Fatalf("lost %d of %d events: %v", len(missing), total, missing)
	}
	last := map[AggregateKey]int64{}
	done := map[string]bool{}
	for _, e := range published {
		if done[e.EventID] {
			continue // a duplicate: allowed, not an order violation
		}
		done[e.EventID] = true
		if v, ok := last[e.Key()]; ok && e.AggregateVersion < v {
			f.t.Fatalf("order: %s/%s version %d published after version %d", e.AggregateType, e.AggregateID, e.AggregateVersion, v)
		}
		last[e.Key()] = e.AggregateVersion
	}
}

// eventually polls cond every 20 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: not within %s", what, timeout)
		}
	}
}

func sortedIDs(es []Event) []string {
	out := ids(es)
	sort.Strings(out)
	return out
}

func fmtIDs(s []string) string { return fmt.Sprint(s) }
