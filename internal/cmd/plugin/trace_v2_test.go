package plugin

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardstore"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/testenv/golden"
)

// TestTraceV2StatementMatchesGoldenFile: the v2 trace's lookup is testdata/trace_v2.sql
// (rewrite it with -update).
func TestTraceV2StatementMatchesGoldenFile(t *testing.T) {
	golden.Statements(t, []golden.Statement{{Name: "trace_v2",
		About: "trace of a v2 table: the status view's row of event $1 and, once SENT, its batch log row",
		SQL:   traceV2SQL(pgident.Table{Schema: "public", Name: "outbox_event"})}})
}

// v2Pipeline is a namespace with pipeline "orders" on a v2 table outbox_event: one
// batch of the shard store's real read and fenced advance published ev-a-1 and ev-b-1
// (partitions and offsets as a broker would answer), ev-c-1 went DEAD, ev-d-1 came
// after the batch.
func v2Pipeline(t *testing.T) (string, outboxDB) {
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
		o.insert(t, "ev-"+agg+"-1", agg, 1, "")
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
	if _, _, err := st.Tick(ctx); err != nil {
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
// one its hold state and code (never the payload or the message), a new one PENDING;
// --aggregate refuses with one line.
func TestTraceV2Event(t *testing.T) {
	ns, o := v2Pipeline(t)
	r := plugin(t, "trace", "ev-b-1", "-n", ns).mustSucceed(t)
	noSecrets(t, r, o.dsn)
	out := r.stdout
	hasRow(t, out, "EVENT ev-b-1 pipeline "+ns+"/orders table public.outbox_event (contract v2)")
	field(t, out, "status", "SENT")
	field(t, out, "destination", "topic orders, key b")
	field(t, out, "broker", "partition 1, offset 1098")
	var batch string
	if err := o.db.QueryRow(`SELECT batch::text FROM outbox_event_batch`).Scan(&batch); err != nil {
		t.Fatal(err)
	}
	if !hasPrefixRow(out, "batch: "+batch+" by worker w1 at ") {
		t.Errorf("no batch line for batch %s:\n%s", batch, out)
	}

	r = plugin(t, "trace", "ev-c-1", "-n", ns).mustSucceed(t)
	noSecrets(t, r, o.dsn)
	field(t, r.stdout, "status", "DEAD")
	field(t, r.stdout, "last error", "MESSAGE_TOO_LARGE")
	field(t, r.stdout, "broker", "-")

	out = plugin(t, "trace", "ev-d-1", "-n", ns).mustSucceed(t).stdout
	field(t, out, "status", "PENDING")
	field(t, out, "batch", "-")

	plugin(t, "trace", "--aggregate", "order/a", "-n", ns, "-p", "orders").mustFailWith(t, 1, "follows contract v2: trace --aggregate does not read it yet")
}

func hasPrefixRow(out, prefix string) bool {
	for _, r := range rows(out) {
		if len(r) >= len(prefix) && r[:len(prefix)] == prefix {
			return true
		}
	}
	return false
}
