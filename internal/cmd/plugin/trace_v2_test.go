package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardstore"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/testenv/golden"
)

// TestTraceV2StatementsMatchGoldenFiles: the v2 trace's lookups are testdata/trace_v2*.sql
// (rewrite them with -update): of one event in the status view, of one event in the
// archive, and of an aggregate's newest versions.
func TestTraceV2StatementsMatchGoldenFiles(t *testing.T) {
	tb := pgident.Table{Schema: "public", Name: "outbox_event"}
	golden.Statements(t, []golden.Statement{
		{Name: "trace_v2", SQL: traceV2SQL(tb),
			About: "trace of a v2 table: the status view's row of event $1 and, once SENT, its batch log row"},
		{Name: "trace_v2_archive", SQL: traceV2ArchiveSQL(tb),
			About: "trace of a v2 table: the newest archive row of event $1 and, if PASSED, its batch log row"},
		{Name: "trace_v2_aggregate", SQL: traceV2AggregateSQL(tb),
			About: "trace --aggregate of a v2 table: the status view's rows of the newest $3 versions of aggregate $1/$2, each with its batch log row once SENT"},
	})
}

// hasBatchLine checks that out names the batch log's (only) row as the one that
// published the event, by worker w1 (v2Pipeline's).
func hasBatchLine(t *testing.T, o outboxDB, out string) {
	t.Helper()
	var batch string
	if err := o.db.QueryRow(`SELECT batch::text FROM outbox_event_batch`).Scan(&batch); err != nil {
		t.Fatal(err)
	}
	if !hasPrefixRow(out, "batch: "+batch+" by worker w1 at ") {
		t.Errorf("no batch line for batch %s:\n%s", batch, out)
	}
}

// v2Pipeline is a namespace with pipeline "orders" on a v2 table outbox_event: one
// batch of the shard store's real read and fenced advance published ev-a-1 and ev-b-1
// (partitions and offsets as a broker would answer), ev-c-1 went DEAD, ev-d-1 came
// after the batch.
func v2Pipeline(t *testing.T) (string, outboxDB) {
	t.Helper()
	return v2PipelineSet(t, "")
}

// v2PipelineSet is v2Pipeline with set (a SET clause, as for outboxDB.insert) applied
// to ev-a-1, ev-b-1 and ev-c-1 before the relay reads them.
func v2PipelineSet(t *testing.T, set string) (string, outboxDB) {
	t.Helper()
	ctx := context.Background()
	ns := newNamespace(t)
	dsn, db := pgSrv.OpenDatabase(t)
	tb, _ := pgident.NewTable("public", "outbox_event")
	if err := schema.MigrateV2(ctx, db, tb, schema.V2Options{Shards: 4}); err != nil {
		t.Fatal(err)
	}
	o := outboxDB{dsn: dsn, db: db, table: tb}
	for _, agg := range []string{"a", "b", "c"} {
		o.insert(t, "ev-"+agg+"-1", agg, 1, set)
	}
	st, err := shardstore.New(db, shardstore.Options{Table: tb, Shards: 4, WorkerID: "w1", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var leases shardstore.Leases
	if _, err := st.Rebalance(ctx, &leases); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Tick(ctx, leases.Tokens()); err != nil {
		t.Fatal(err)
	}
	b, err := st.Read(ctx, leases.Tokens(), 0, 100)
	if err != nil || len(b.Events) != 3 {
		t.Fatalf("read %d events: %v", len(b.Events), err)
	}
	a := shardstore.Advance{Windows: b.Windows}
	results := make([]shardstore.Result, len(b.Events))
	for i, e := range b.Events {
		if e.AggregateID == "c" {
			results[i] = shardstore.Result{Outcome: shardstore.Rejected, Code: "MESSAGE_TOO_LARGE", Message: `{"secret":"payload"} too large`}
			continue
		}
		a.Partitions = append(a.Partitions, int32(len(e.AggregateID)))
		a.Offsets = append(a.Offsets, 1000+int64(e.AggregateID[0]))
		a.Seqs = append(a.Seqs, e.Seq)
	}
	a.Holds = shardstore.PlanHolds(b.Events, results, 3)
	if _, err := st.Advance(ctx, a); err != nil {
		t.Fatal(err)
	}
	o.insert(t, "ev-d-1", "d", 1, "")
	createSecret(t, ns, "db", map[string]string{"dsn": dsn})
	pipeline(t, ns, "orders", "db", "")
	return ns, o
}

// trace on a v2 table: a published event shows its batch and Kafka position, a DEAD
// one its hold state and code (never the payload or the message), a new one PENDING.
func TestTraceV2Event(t *testing.T) {
	ns, o := v2Pipeline(t)
	r := plugin(t, "trace", "ev-b-1", "-n", ns).mustSucceed(t)
	noSecrets(t, r, o.dsn)
	out := r.stdout
	hasRow(t, out, "EVENT ev-b-1 pipeline "+ns+"/orders table public.outbox_event (contract v2)")
	field(t, out, "status", "SENT")
	field(t, out, "destination", "topic orders, key b")
	field(t, out, "broker", "partition 1, offset 1098")
	hasBatchLine(t, o, out)

	r = plugin(t, "trace", "ev-c-1", "-n", ns).mustSucceed(t)
	noSecrets(t, r, o.dsn)
	field(t, r.stdout, "status", "DEAD")
	field(t, r.stdout, "last error", "MESSAGE_TOO_LARGE")
	field(t, r.stdout, "broker", "-")

	out = plugin(t, "trace", "ev-d-1", "-n", ns).mustSucceed(t).stdout
	field(t, out, "status", "PENDING")
	field(t, out, "batch", "-")
}

// trace --aggregate on a v2 table prints v1's table: a published version SENT at its
// batch's time, a newer one PENDING, a DEAD one with its hold row's attempts and code
// (never the message or the payload); --limit keeps the newest versions.
func TestTraceV2Aggregate(t *testing.T) {
	ns, o := v2Pipeline(t)
	o.insert(t, "ev-a-2", "a", 2, "")
	ts := func(q string, args ...any) string {
		t.Helper()
		var at time.Time
		if err := o.db.QueryRow(q, args...).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return timestamp(at)
	}
	created := func(id string) string {
		return ts(`SELECT created_at FROM outbox_event WHERE event_id = $1`, id)
	}
	batchAt := ts(`SELECT at FROM outbox_event_batch`)
	var deadAttempts string
	if err := o.db.QueryRow(`SELECT attempts::text FROM outbox_event_hold WHERE event_id = 'ev-c-1'`).Scan(&deadAttempts); err != nil {
		t.Fatal(err)
	}

	r := plugin(t, "trace", "--aggregate", "order/a", "-n", ns).mustSucceed(t)
	noSecrets(t, r, o.dsn)
	out := r.stdout
	hasRow(t, out, "AGGREGATE order/a pipeline "+ns+"/orders table public.outbox_event (contract v2)")
	hasRow(t, out, "VERSION EVENT ID EVENT TYPE STATUS ATTEMPTS LAST ERROR CREATED SENT")
	hasRow(t, out, "1 ev-a-1 OrderPlaced SENT 0 - "+created("ev-a-1")+" "+batchAt)
	hasRow(t, out, "2 ev-a-2 OrderPlaced PENDING 0 - "+created("ev-a-2")+" -")
	if strings.Contains(out, "ev-b-1") {
		t.Errorf("another aggregate's row is listed:\n%s", out)
	}

	r = plugin(t, "trace", "--aggregate", "order/c", "-n", ns).mustSucceed(t)
	noSecrets(t, r, o.dsn)
	hasRow(t, r.stdout, "1 ev-c-1 OrderPlaced DEAD "+deadAttempts+" MESSAGE_TOO_LARGE "+created("ev-c-1")+" -")

	out = plugin(t, "trace", "--aggregate", "order/a", "--limit", "1", "-n", ns).mustSucceed(t).stdout
	if strings.Contains(out, "ev-a-1") || !strings.Contains(out, "newest 1 versions") {
		t.Errorf("--limit 1 should show version 2 only and say so:\n%s", out)
	}
	plugin(t, "trace", "--aggregate", "order/none", "-n", ns, "-p", "orders").mustFailWith(t, 1,
		`aggregate order/none has no rows in table public.outbox_event of pipeline "orders"`)
}

func hasPrefixRow(out, prefix string) bool {
	for _, r := range rows(out) {
		if len(r) >= len(prefix) && r[:len(prefix)] == prefix {
			return true
		}
	}
	return false
}
