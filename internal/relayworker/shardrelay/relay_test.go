package shardrelay_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-operator/outbox-operator/internal/backoff"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/health"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/metrics"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardrelay"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardstore"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/testenv/kafkatest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

var (
	srv    *pgtest.Server
	broker *kafkatest.Broker
	ctx    = context.Background()
	tb     = func() pgident.Table { t, _ := pgident.NewTable("public", "outbox_v2"); return t }()
)

const shards = 16

func TestMain(m *testing.M) {
	b, err := kafkatest.Start(3)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	broker = b
	defer b.Close()
	pgtest.Main(m, &srv)
}

var topicSeq atomic.Int64

// topic creates a fresh topic with 3 partitions.
func topic(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("v2t%d", topicSeq.Add(1))
	if err := broker.CreateTopic(name, 3); err != nil {
		t.Fatal(err)
	}
	return name
}

// newTable is a migrated v2 table in a database of its own.
func newTable(t *testing.T) (string, *sql.DB) {
	t.Helper()
	dsn, db := srv.OpenDatabase(t)
	if err := schema.MigrateV2(ctx, db, tb, schema.V2Options{Shards: shards}); err != nil {
		t.Fatal(err)
	}
	return dsn, db
}

type opts struct {
	batch       int
	lease       time.Duration
	maxAttempts int
	grace       time.Duration
	maxBytes    int64
	poll        time.Duration // PollInterval (0: 100 ms)
}

type worker struct {
	r      *shardrelay.Relay
	m      *metrics.Metrics
	h      *health.State
	cancel context.CancelFunc
	done   chan error
}

// start runs a worker with a pool of its own (as a relay process has).
func start(t *testing.T, dsn, id string, o opts) *worker {
	t.Helper()
	if o.batch == 0 {
		o.batch = 50
	}
	if o.lease == 0 {
		o.lease = 6 * time.Second
	}
	if o.maxAttempts == 0 {
		o.maxAttempts = 100
	}
	if o.poll == 0 {
		o.poll = 100 * time.Millisecond
	}
	if o.grace == 0 {
		o.grace = time.Minute
	}
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	st, err := shardstore.New(db, shardstore.Options{Table: tb, Shards: shards, WorkerID: id, Lease: o.lease})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := publish.New(publish.Options{Brokers: broker.Addrs(), BatchSize: o.batch, WriteTimeout: 2 * time.Second, MaxMessageBytes: o.maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New("test")
	h := health.New(time.Minute)
	r := shardrelay.New(shardrelay.Options{
		Table: tb, DSN: dsn, WorkerID: id, BatchSize: o.batch, Lease: o.lease, PollInterval: o.poll,
		MaxAttempts: o.maxAttempts, Backoff: backoff.Policy{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond},
		UnknownTopicGrace: o.grace, ShutdownTimeout: 5 * time.Second, StatsInterval: 200 * time.Millisecond,
	}, db, st, pub, m, h, logr.Discard())
	c, cancel := context.WithCancel(ctx)
	w := &worker{r: r, m: m, h: h, cancel: cancel, done: make(chan error, 1)}
	go func() { w.done <- r.Run(c) }()
	t.Cleanup(func() {
		w.stop(t)
		_ = st.Close()
		_ = pub.Close()
	})
	return w
}

func (w *worker) stop(t *testing.T) {
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.cancel = nil
	select {
	case err := <-w.done:
		if err != nil {
			t.Errorf("worker returned %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("worker did not stop within 20s")
	}
}

// ev is one event a test inserts.
type ev struct {
	agg     string
	version int
	topic   string
	payload string        // default {"v":version}
	age     time.Duration // created_at this long ago
}

func (e ev) id() string { return fmt.Sprintf("%s-v%d", e.agg, e.version) }

// insert inserts evs in one transaction, as a producer's plain INSERTs.
func insert(t *testing.T, db *sql.DB, evs ...ev) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // after commit: a no-op
	for _, e := range evs {
		p := e.payload
		if p == "" {
			p = fmt.Sprintf(`{"v":%d}`, e.version)
		}
		if _, err := tx.Exec(`INSERT INTO outbox_v2 (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
    destination, message_key, payload, created_at) VALUES ($1, 'order', $2, $3, 'order.changed', $4, $2, $5, now() - $6 * interval '1 millisecond')`,
			e.id(), e.agg, e.version, e.topic, p, e.age.Milliseconds()); err != nil {
			t.Fatalf("insert %s: %v", e.id(), err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// delivery is what a topic received, checked against what was inserted.
type delivery struct {
	lost, duplicates, reorders int
	detail                     string
}

// check reads every record of topics and compares them with want (event ids per
// aggregate in version order): an event never received is lost, one received twice a
// duplicate, and an aggregate's first receipt of a version after a newer one a
// reorder.
func check(t *testing.T, want map[string][]string, topics ...string) delivery {
	t.Helper()
	total := 0
	for _, ids := range want {
		total += len(ids)
	}
	var recs []*kgo.Record
	for _, tp := range topics {
		n := int(broker.Count(tp))
		got, err := broker.ReadAllWithin(30*time.Second, tp, n)
		if err != nil {
			t.Fatalf("read %s: %v", tp, err)
		}
		recs = append(recs, got...)
	}
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].Topic != recs[j].Topic {
			return recs[i].Topic < recs[j].Topic
		}
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return recs[i].Offset < recs[j].Offset
	})
	var d delivery
	seen := map[string]int{}
	last := map[string]int{}
	for _, r := range recs {
		id := header(r, "event_id")
		agg := header(r, "aggregate_id")
		v, err := strconv.Atoi(header(r, "aggregate_version"))
		if err != nil {
			t.Fatalf("record %s: version: %v", id, err)
		}
		seen[id]++
		if seen[id] > 1 {
			d.duplicates++
			continue
		}
		if v < last[agg] {
			d.reorders++
			d.detail += fmt.Sprintf(" %s v%d after v%d;", agg, v, last[agg])
		}
		last[agg] = max(last[agg], v)
	}
	for _, ids := range want {
		for _, id := range ids {
			if seen[id] == 0 {
				d.lost++
				d.detail += " lost " + id + ";"
			}
		}
	}
	return d
}

func header(r *kgo.Record, k string) string {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

func count(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// holds is the hold table as "event_id:STATE" in (aggregate, version) order.
func holds(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT event_id || ':' || state FROM outbox_v2_hold ORDER BY aggregate_id, aggregate_version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// untouched checks the relay never updated or deleted an outbox row: the table's
// n_tup_upd + n_tup_del, once its statistics count every insert.
func untouched(t *testing.T, db *sql.DB, inserted int) {
	t.Helper()
	relaytest.Eventually(t, 30*time.Second, "the table's statistics to count the inserts", func() bool {
		return count(t, db, `SELECT COALESCE((SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'outbox_v2'), 0)`) >= inserted
	})
	if n := count(t, db, `SELECT n_tup_upd + n_tup_del FROM pg_stat_user_tables WHERE relname = 'outbox_v2'`); n != 0 {
		t.Fatalf("the relay updated or deleted %d outbox rows", n)
	}
}

func metric(m *metrics.Metrics, name string) float64 {
	mfs, err := m.Registry.Gather()
	if err != nil {
		return -1
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mm := range mf.GetMetric() {
			if c := mm.GetCounter(); c != nil {
				sum += c.GetValue()
			}
			if g := mm.GetGauge(); g != nil {
				sum += g.GetValue()
			}
		}
	}
	return sum
}

// Two workers drain many versions of many aggregates over two topics, half of them
// inserted while they run: nothing lost, no version before an older one, the shards
// shared, and not one outbox row updated or deleted.
func TestTwoWorkersDrainInOrder(t *testing.T) {
	dsn, db := newTable(t)
	ta, tb2 := topic(t), topic(t)
	const aggs, versions = 40, 25
	want := map[string][]string{}
	batch := func(from, to int) []ev {
		var evs []ev
		for v := from; v <= to; v++ {
			for a := 0; a < aggs; a++ {
				e := ev{agg: fmt.Sprintf("a%d", a), version: v, topic: []string{ta, tb2}[a%2]}
				want[e.agg] = append(want[e.agg], e.id())
				evs = append(evs, e)
			}
		}
		return evs
	}
	for v := 1; v <= 12; v += 4 {
		insert(t, db, batch(v, min(v+3, 12))...)
	}
	w1 := start(t, dsn, "w1", opts{})
	w2 := start(t, dsn, "w2", opts{})
	// w1 may take every shard before w2 counts as live: the shares even out within a lease.
	relaytest.Eventually(t, 30*time.Second, "both workers to hold shards", func() bool {
		return count(t, db, `SELECT count(DISTINCT split_part(owner, '/', 1)) FROM outbox_v2_shard WHERE owner IS NOT NULL`) == 2
	})
	for v := 13; v <= versions; v++ {
		insert(t, db, batch(v, v)...)
	}
	total := aggs * versions
	deadline := time.Now().Add(60 * time.Second)
	for broker.Count(ta)+broker.Count(tb2) < int64(total) {
		if time.Now().After(deadline) {
			t.Logf("on Kafka: %d of %d", broker.Count(ta)+broker.Count(tb2), total)
			dumpShards(t, db)
			d := check(t, want, ta, tb2)
			t.Logf("%+v", d)
			rows, err := db.Query(`SELECT event_id, shard, seq, txid::text FROM outbox_v2 ORDER BY seq`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var id, txid string
				var sh, seq int64
				if err := rows.Scan(&id, &sh, &seq, &txid); err != nil {
					t.Fatal(err)
				}
				if strings.Contains(d.detail, "lost "+id+";") {
					t.Logf("lost %s shard %d seq %d txid %s", id, sh, seq, txid)
				}
			}
			t.FailNow()
		}
		time.Sleep(50 * time.Millisecond)
	}
	d := check(t, want, ta, tb2)
	t.Logf("lost %d, duplicates %d, reorders %d; sent by w1 %.0f, w2 %.0f", d.lost, d.duplicates, d.reorders,
		metric(w1.m, "outbox_send_success_total"), metric(w2.m, "outbox_send_success_total"))
	if d.lost != 0 || d.reorders != 0 {
		t.Fatalf("lost %d, reorders %d:%s", d.lost, d.reorders, d.detail)
	}
	if metric(w1.m, "outbox_send_success_total") == 0 || metric(w2.m, "outbox_send_success_total") == 0 {
		t.Fatal("one worker sent nothing: the shards were not shared")
	}
	if h := holds(t, db); len(h) != 0 {
		t.Fatalf("hold rows after a clean drain: %v", h)
	}
	untouched(t, db, total)
}

// A topic whose partitions refuse writes while another topic works: the failed
// version becomes RETRY in the hold table and the newer ones (also those inserted
// later) HELD behind it; once the topic takes writes again, all of them are sent in
// order and nothing is DEAD.
func TestTransientFailureHoldsNewerVersionsThenSendsInOrder(t *testing.T) {
	dsn, db := newTable(t)
	bad, good := topic(t), topic(t)
	refusal := broker.RefuseProduce(kafkatest.ErrNotEnoughReplicas, bad)
	defer refusal.Stop()
	want := map[string][]string{}
	var evs []ev
	for v := 1; v <= 4; v++ {
		for _, e := range []ev{{agg: "x", version: v, topic: bad}, {agg: "y", version: v, topic: good}} {
			want[e.agg] = append(want[e.agg], e.id())
			evs = append(evs, e)
		}
	}
	insert(t, db, evs...)
	w := start(t, dsn, "w1", opts{})
	relaytest.Eventually(t, 30*time.Second, "x-v1 RETRY, x-v2..4 HELD", func() bool {
		return strings.Join(holds(t, db), " ") == "x-v1:RETRY x-v2:HELD x-v3:HELD x-v4:HELD"
	})
	later := ev{agg: "x", version: 5, topic: bad}
	want["x"] = append(want["x"], later.id())
	insert(t, db, later)
	relaytest.Eventually(t, 30*time.Second, "x-v5 HELD behind x-v1", func() bool {
		h := holds(t, db)
		return len(h) == 5 && h[4] == "x-v5:HELD"
	})
	if broker.Count(good) != 4 {
		t.Fatalf("the working topic has %d records, want 4", broker.Count(good))
	}
	// The refused topic's retries do not hold up the other topic's new events (they
	// are the trial that resumes the worker when the retries alone paused it).
	more := ev{agg: "y", version: 5, topic: good}
	want["y"] = append(want["y"], more.id())
	insert(t, db, more)
	relaytest.Eventually(t, 10*time.Second, "y-v5 on Kafka while x's topic is still refused", func() bool { return broker.Count(good) >= 5 })
	refusal.Set(false)
	relaytest.Eventually(t, 30*time.Second, "the hold table empty", func() bool { return len(holds(t, db)) == 0 })
	relaytest.Eventually(t, 10*time.Second, "x's 5 versions on Kafka", func() bool { return broker.Count(bad) >= 5 })
	d := check(t, want, bad, good)
	if d.lost != 0 || d.reorders != 0 || d.duplicates != 0 {
		t.Fatalf("lost %d, duplicates %d, reorders %d:%s", d.lost, d.duplicates, d.reorders, d.detail)
	}
	if n := metric(w.m, "outbox_send_dead_total"); n != 0 {
		t.Fatalf("%v events DEAD", n)
	}
	if n := metric(w.m, "outbox_send_retry_total"); n < 1 {
		t.Fatalf("outbox_send_retry_total = %v, want the failed attempts counted", n)
	}
	untouched(t, db, 10)
}

// Permanent failures go DEAD in the hold table and hold nothing back: a message too
// large for the brokers, and a topic still missing after the unknown-topic grace
// (whose aggregate's next version goes to a topic that exists).
func TestPermanentFailureIsDeadAndBlocksNothing(t *testing.T) {
	dsn, db := newTable(t)
	tp := topic(t)
	missing := fmt.Sprintf("never-created-%d", topicSeq.Add(1))
	big := `{"s":"` + strings.Repeat("x", 20_000) + `"}`
	insert(t, db,
		ev{agg: "big", version: 1, topic: tp, payload: big},
		ev{agg: "big", version: 2, topic: tp},
		ev{agg: "big", version: 3, topic: tp},
		ev{agg: "lost-topic", version: 1, topic: missing, age: time.Hour},
		ev{agg: "lost-topic", version: 2, topic: tp},
	)
	w := start(t, dsn, "w1", opts{maxBytes: 10_000, grace: time.Minute})
	relaytest.Eventually(t, 30*time.Second, "the later versions on Kafka", func() bool { return broker.Count(tp) >= 3 })
	relaytest.Eventually(t, 10*time.Second, "two DEAD hold rows", func() bool {
		return strings.Join(holds(t, db), " ") == "big-v1:DEAD lost-topic-v1:DEAD"
	})
	var code string
	if err := db.QueryRow(`SELECT last_error_code FROM outbox_v2_hold WHERE event_id = 'big-v1'`).Scan(&code); err != nil {
		t.Fatal(err)
	}
	if code != publish.CodeMessageTooLarge {
		t.Fatalf("big-v1 code %q, want %s", code, publish.CodeMessageTooLarge)
	}
	if err := db.QueryRow(`SELECT last_error_code FROM outbox_v2_hold WHERE event_id = 'lost-topic-v1'`).Scan(&code); err != nil {
		t.Fatal(err)
	}
	if code != publish.CodeTopicNotFound {
		t.Fatalf("lost-topic-v1 code %q, want %s", code, publish.CodeTopicNotFound)
	}
	d := check(t, map[string][]string{"big": {"big-v2", "big-v3"}, "lost-topic": {"lost-topic-v2"}}, tp)
	if d.lost != 0 || d.reorders != 0 {
		t.Fatalf("lost %d, reorders %d:%s", d.lost, d.reorders, d.detail)
	}
	if n := metric(w.m, "outbox_send_dead_total"); n != 2 {
		t.Fatalf("outbox_send_dead_total = %v, want 2", n)
	}
	untouched(t, db, 5)
}

// Brokers that refuse every write: the worker pauses (not ready, outbox_broker_up 0),
// no attempt is counted and nothing goes to the hold table however many trials are
// refused; once they store again everything is sent.
func TestBrokerRefusingEveryWritePausesWithoutAttempts(t *testing.T) {
	dsn, db := newTable(t)
	tp := topic(t)
	refusal := broker.RefuseProduce(kafkatest.ErrNotEnoughReplicas, tp)
	defer refusal.Stop()
	want := map[string][]string{}
	var evs []ev
	for a := 0; a < 10; a++ {
		for v := 1; v <= 5; v++ {
			e := ev{agg: fmt.Sprintf("p%d", a), version: v, topic: tp}
			want[e.agg] = append(want[e.agg], e.id())
			evs = append(evs, e)
		}
	}
	insert(t, db, evs...)
	w := start(t, dsn, "w1", opts{maxAttempts: 2})
	relaytest.Eventually(t, 30*time.Second, "paused, and three trials refused", func() bool {
		ready, _ := w.h.Ready()
		return metric(w.m, "outbox_broker_up") == 0 && !ready && refusal.Refused() >= 3
	})
	if h := holds(t, db); len(h) != 0 {
		t.Fatalf("hold rows while the brokers refuse everything: %v", h)
	}
	if n := metric(w.m, "outbox_send_retry_total") + metric(w.m, "outbox_send_dead_total"); n != 0 {
		t.Fatalf("%v attempts counted while paused", n)
	}
	if n := count(t, db, `SELECT count(*) FROM outbox_v2_workers WHERE worker_id = 'w1' AND NOT broker_up`); n != 1 {
		t.Fatalf("the worker-status row does not say the brokers are down")
	}
	refusal.Set(false)
	relaytest.Eventually(t, 30*time.Second, "every event on Kafka", func() bool { return broker.Count(tp) >= 50 })
	relaytest.Eventually(t, 10*time.Second, "resumed", func() bool {
		ready, _ := w.h.Ready()
		return ready && metric(w.m, "outbox_broker_up") == 1
	})
	d := check(t, want, tp)
	if d.lost != 0 || d.reorders != 0 {
		t.Fatalf("lost %d, reorders %d:%s", d.lost, d.reorders, d.detail)
	}
	if h := holds(t, db); len(h) != 0 {
		t.Fatalf("hold rows after the outage: %v", h)
	}
	if n := metric(w.m, "outbox_broker_pauses_total"); n != 1 {
		t.Fatalf("outbox_broker_pauses_total = %v, want 1", n)
	}
	untouched(t, db, 50)
}

// dumpShards logs the shard and tick tables (a failed test's evidence).
func dumpShards(t *testing.T, db *sql.DB) {
	t.Helper()
	rows, err := db.Query(`SELECT s.shard, COALESCE(s.owner, '-'), s.lo_tick, COALESCE(s.hi_tick, 0), COALESCE(s.pos, 0),
       (SELECT count(*) FROM outbox_v2 o WHERE o.shard = s.shard), (SELECT max(seq) FROM outbox_v2 o WHERE o.shard = s.shard)
FROM outbox_v2_shard s ORDER BY s.shard`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var sh, lo, hi, pos, n int64
		var owner string
		var maxSeq sql.NullInt64
		if err := rows.Scan(&sh, &owner, &lo, &hi, &pos, &n, &maxSeq); err != nil {
			t.Fatal(err)
		}
		t.Logf("shard %d owner %s lo %d hi %d pos %d rows %d max seq %d", sh, owner, lo, hi, pos, n, maxSeq.Int64)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	trows, err := db.Query(`SELECT tick, snap::text, seq_before, seq_after FROM outbox_v2_tick ORDER BY tick`)
	if err != nil {
		t.Fatal(err)
	}
	defer trows.Close()
	for trows.Next() {
		var tick, before, after int64
		var snap string
		if err := trows.Scan(&tick, &snap, &before, &after); err != nil {
			t.Fatal(err)
		}
		t.Logf("tick %d snap %s seq %d..%d", tick, snap, before, after)
	}
	if err := trows.Err(); err != nil {
		t.Fatal(err)
	}
}

// A worker that stops (SIGTERM: its context ends) releases its shards and removes its
// worker row after its last batch: the other takes every shard at its next lease
// round, without waiting for the leases to run out; events keep flowing in order.
func TestStoppedWorkerReleasesItsShards(t *testing.T) {
	dsn, db := newTable(t)
	tp := topic(t)
	const lease = 9 * time.Second
	w1 := start(t, dsn, "w1", opts{lease: lease})
	start(t, dsn, "w2", opts{lease: lease})
	relaytest.Eventually(t, 30*time.Second, "both workers to hold shards", func() bool {
		return count(t, db, `SELECT count(DISTINCT split_part(owner, '/', 1)) FROM outbox_v2_shard WHERE owner IS NOT NULL`) == 2
	})
	want := map[string][]string{}
	for v := 1; v <= 3; v++ {
		var evs []ev
		for a := 0; a < 20; a++ {
			e := ev{agg: fmt.Sprintf("s%d", a), version: v, topic: tp}
			want[e.agg] = append(want[e.agg], e.id())
			evs = append(evs, e)
		}
		insert(t, db, evs...)
	}
	w1.stop(t)
	stopped := time.Now()
	if n := count(t, db, `SELECT count(*) FROM outbox_v2_shard WHERE owner LIKE 'w1/%'`); n != 0 {
		t.Fatalf("w1 still owns %d shards after it stopped", n)
	}
	if n := count(t, db, `SELECT count(*) FROM outbox_v2_workers WHERE worker_id = 'w1'`); n != 0 {
		t.Fatal("w1's worker row outlived its stop")
	}
	relaytest.Eventually(t, lease, "w2 to hold every shard", func() bool {
		return count(t, db, `SELECT count(*) FROM outbox_v2_shard WHERE owner LIKE 'w2/%'`) == shards
	})
	t.Logf("w2 held every shard %s after w1 stopped (lease %s)", time.Since(stopped).Round(10*time.Millisecond), lease)
	for a := 0; a < 20; a++ {
		e := ev{agg: fmt.Sprintf("s%d", a), version: 4, topic: tp}
		want[e.agg] = append(want[e.agg], e.id())
		insert(t, db, e)
	}
	relaytest.Eventually(t, 30*time.Second, "every event on Kafka", func() bool { return broker.Count(tp) >= 80 })
	if d := check(t, want, tp); d.lost != 0 || d.reorders != 0 {
		t.Fatalf("lost %d, reorders %d:%s", d.lost, d.reorders, d.detail)
	}
}
