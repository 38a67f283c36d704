package schema

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// insertV2 is a producer's plain INSERT of the nine producer columns.
const insertV2 = `INSERT INTO %s VALUES ($1, 'order', $2, $3, 'order.changed', 1, 'orders', $2, '{"a":1}')`

func TestMigrateV2IsIdempotentAndConcurrent(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	tb, _ := pgident.NewTable("app", "events")
	if c, err := DetectContract(ctx, db, tb); err != nil || c.Version != ContractNone {
		t.Fatalf("DetectContract before migrate = %+v, %v; want none", c, err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- MigrateV2(ctx, db, tb, V2Options{}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := MigrateV2(ctx, db, tb, V2Options{}); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	c, err := VerifyV2(ctx, db, tb, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c != (Contract{Version: ContractV2, Shards: DefaultShards}) {
		t.Fatalf("contract %+v", c)
	}
	var shards, ticks int
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM app.events_shard), (SELECT count(*) FROM app.events_tick)`).Scan(&shards, &ticks); err != nil {
		t.Fatal(err)
	}
	if shards != DefaultShards || ticks != 1 {
		t.Fatalf("%d shard rows and %d ticks after four migrates, want %d and 1", shards, ticks, DefaultShards)
	}

	// v1 and v2 tables are told apart (upgrade_test.go: a v2 migrate upgrades a v1 table).
	v1, _ := pgident.NewTable("app", "legacy")
	if err := Migrate(ctx, db, v1, Options{}); err != nil {
		t.Fatal(err)
	}
	if c, err := DetectContract(ctx, db, v1); err != nil || c.Version != ContractV1 {
		t.Fatalf("DetectContract(v1 table) = %+v, %v", c, err)
	}
}

// The database fills txid, seq and shard for a plain INSERT of the producer columns;
// a producer cannot write the shard.
func TestV2PlainInsertGetsTxidSeqShard(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	tb, _ := pgident.NewTable("public", "ob")
	if err := MigrateV2(ctx, db, tb, V2Options{Shards: 16}); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"e1", "e2"} {
		if _, err := db.Exec(strings.Replace(insertV2, "%s", tb.Qualified(), 1), id, "o-1", i+1); err != nil {
			t.Fatal(err)
		}
	}
	var seq1, seq2, shard int64
	var sameShard, txidSet bool
	if err := db.QueryRow(`SELECT a.seq, b.seq, a.shard, a.shard = b.shard, a.txid < b.txid
FROM ob a, ob b WHERE a.event_id = 'e1' AND b.event_id = 'e2'`).Scan(&seq1, &seq2, &shard, &sameShard, &txidSet); err != nil {
		t.Fatal(err)
	}
	if seq1 >= seq2 || !sameShard || !txidSet || shard < 0 || shard >= 16 {
		t.Fatalf("seq %d, %d; shard %d (same %v); txids ascending %v", seq1, seq2, shard, sameShard, txidSet)
	}
	_, err := db.Exec(`INSERT INTO ob (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload, shard)
VALUES ('e3', 'order', 'o-1', 3, 't', 'd', 'k', '{}', 0)`)
	// 14+ answer generated_always (428C9); 13 answers syntax_error (42601) with
	// "cannot insert into column", the same refusal.
	if pqErr, ok := err.(*pq.Error); !ok || (pqErr.Code != "428C9" && !(pqErr.Code == "42601" && strings.Contains(pqErr.Message, "cannot insert into column"))) {
		t.Fatalf("writing shard: %v, want it refused as a generated column (428C9; 42601 on PostgreSQL 13)", err)
	}
}

// The longest table name gets every v2 side object under its own, untruncated name.
func TestV2LongestTableName(t *testing.T) {
	db := open(t)
	name := strings.Repeat("x", pgident.MaxLen-len(ReplayAuditSuffix))
	tb, err := pgident.NewTable("public", name)
	if err != nil {
		t.Fatal(err)
	}
	if err := MigrateV2(context.Background(), db, tb, V2Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyV2(context.Background(), db, tb, 0); err != nil {
		t.Fatal(err)
	}
	for _, idx := range []string{"_version_key", "_seq_idx", "_txid_idx", "_hold_due", "_hold_open"} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM pg_indexes WHERE schemaname = 'public' AND indexname = $1`, name+idx).Scan(&n); err != nil || n != 1 {
			t.Fatalf("index %s%s: n=%d err=%v", name, idx, n, err)
		}
	}
}

// Each rule VerifyV2 checks is broken on a real table, and each refusal is one line
// naming it.
func TestVerifyV2Refusals(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		rows   bool
		break_ []string // statements that break the table ("ob" is the table)
		shards int
		want   string
	}{
		{name: "unknown contract version", break_: []string{`UPDATE ob_contract SET version = 3`}, want: "contract version 3 is unknown"},
		{name: "shard count change with rows", rows: true, shards: 512, want: "has 32 shards and holds events; 512 shards would move aggregates"},
		{name: "shard count change on an empty table", shards: 512, want: "migrate --shards 512"},
		{name: "txid default", break_: []string{`ALTER TABLE ob ALTER COLUMN txid SET DEFAULT '1'::xid8`}, want: "column txid's default is"},
		{name: "txid default dropped", break_: []string{`ALTER TABLE ob ALTER COLUMN txid DROP DEFAULT`}, want: "column txid's default is none"},
		{name: "seq default without the CASE", break_: []string{`ALTER TABLE ob ALTER COLUMN seq SET DEFAULT nextval('ob_seq')`}, want: "column seq's default is"},
		{name: "sequence cache", break_: []string{`ALTER SEQUENCE ob_seq CACHE 20`}, want: "has CACHE 20; the contract needs CACHE 1"},
		{name: "shard expression", break_: []string{`DROP VIEW ob_status`, `ALTER TABLE ob DROP COLUMN shard`,
			`ALTER TABLE ob ADD COLUMN shard smallint NOT NULL GENERATED ALWAYS AS ((hashtext(aggregate_id) & 255)::smallint) STORED`},
			want: "column shard is not the contract's generated column"},
		{name: "txids from the future", rows: true, break_: []string{
			`INSERT INTO ob (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload, txid)
VALUES ('restored', 'order', 'o-9', 1, 't', 'd', 'k', '{}', '4000000000')`}, want: "has txids from the future (4000000000"},
		{name: "batch log of an earlier migrate", break_: []string{`ALTER TABLE ob_batch DROP COLUMN seqs`}, want: "has no seqs column (made by an earlier migrate; run `relayworker migrate`"},
		{name: "ticks from the future", break_: []string{`UPDATE ob_tick SET snap_xmax = '4000000000'`}, want: "has ticks from the future"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := open(t)
			tb, _ := pgident.NewTable("public", "ob")
			if err := MigrateV2(ctx, db, tb, V2Options{}); err != nil {
				t.Fatal(err)
			}
			if tc.rows {
				if _, err := db.Exec(strings.Replace(insertV2, "%s", "ob", 1), "e1", "o-1", 1); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := VerifyV2(ctx, db, tb, 0); err != nil {
				t.Fatalf("before breaking it: %v", err)
			}
			for _, q := range tc.break_ {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			_, err := VerifyV2(ctx, db, tb, tc.shards)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("VerifyV2 = %v, want one line containing %q", err, tc.want)
			}
		})
	}
}

// A table made by an earlier v2 migrate (a batch log without seqs, no status view, no
// replay audit table) is completed by migrating again, with its rows.
func TestMigrateV2CompletesAnEarlierTable(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	tb, _ := pgident.NewTable("public", "ob")
	if err := MigrateV2(ctx, db, tb, V2Options{}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`ALTER TABLE ob_batch DROP COLUMN seqs`, `DROP VIEW ob_status`, `DROP TABLE ob_replay_audit`,
		`INSERT INTO ob_batch (owner, shards, last_seq, hi_tick, partitions, offsets) VALUES ('w', '{1}', '{5}', '{1}', '{0}', '{7}')`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := MigrateV2(ctx, db, tb, V2Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyV2(ctx, db, tb, 0); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM ob_batch WHERE seqs IS NULL) + (SELECT count(*) FROM ob_status) + (SELECT count(*) FROM ob_replay_audit)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("want the old batch row kept with seqs NULL, got %d rows", n)
	}
}

// A shard count change is applied to an empty table and refused on one with rows; a
// migrate that names no count keeps the table's.
func TestMigrateV2ChangesShardsOnlyWhileEmpty(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	tb, _ := pgident.NewTable("public", "ob")
	if err := MigrateV2(ctx, db, tb, V2Options{}); err != nil {
		t.Fatal(err)
	}
	if err := MigrateV2(ctx, db, tb, V2Options{Shards: 64}); err != nil {
		t.Fatal(err)
	}
	if c, err := VerifyV2(ctx, db, tb, 64); err != nil || c.Shards != 64 {
		t.Fatalf("after resharding the empty table: %+v, %v", c, err)
	}
	var rows int
	if err := db.QueryRow(`SELECT count(*) FROM ob_shard`).Scan(&rows); err != nil || rows != 64 {
		t.Fatalf("%d shard rows (%v), want 64", rows, err)
	}
	// Fewer shards too (the default's 32 to 16, as 256 to 32 would): the rows of the
	// shards beyond the count go.
	if err := MigrateV2(ctx, db, tb, V2Options{Shards: 16}); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM ob_shard`).Scan(&rows); err != nil || rows != 16 {
		t.Fatalf("%d shard rows (%v) after resharding to 16, want 16", rows, err)
	}
	if _, err := db.Exec(strings.Replace(insertV2, "%s", "ob", 1), "e1", "o-1", 1); err != nil {
		t.Fatal(err)
	}
	err := MigrateV2(ctx, db, tb, V2Options{Shards: 256})
	if err == nil || !strings.Contains(err.Error(), "has 16 shards and holds events") {
		t.Fatalf("resharding a table with rows = %v, want a refusal", err)
	}
	// No count given (a pipeline without spec.source.shards): the table keeps its own,
	// whatever today's default is.
	if err := MigrateV2(ctx, db, tb, V2Options{}); err != nil {
		t.Fatalf("migrate without a shard count on a 16-shard table with rows: %v", err)
	}
	if c, err := VerifyV2(ctx, db, tb, 0); err != nil || c.Shards != 16 {
		t.Fatalf("after a migrate without a shard count: %+v, %v; want 16 shards kept", c, err)
	}
	if err := MigrateV2(ctx, db, tb, V2Options{Shards: 100}); err == nil || !strings.Contains(err.Error(), "not a power of two") {
		t.Fatalf("100 shards = %v", err)
	}
}

// A migrate of an existing v2 table beside a producer's transaction that holds the
// table and has yet to draw from the sequence: the migrate takes the table first and
// waits for the transaction, which then inserts and commits; both succeed. Taking the
// sequence first (ALTER SEQUENCE ... OWNED BY) and then the table (CREATE INDEX IF NOT
// EXISTS) deadlocked with it, and PostgreSQL aborted one of the two after
// deadlock_timeout (found by the upgrade kill test: the resumed migrate failed).
func TestMigrateV2BesideAProducerDoesNotDeadlock(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	tb, _ := pgident.NewTable("public", "ob")
	if err := MigrateV2(ctx, db, tb, V2Options{Shards: 8}); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // committed below
	// What an INSERT holds before its default draws the seq: the table, ROW EXCLUSIVE.
	if _, err := tx.Exec(`LOCK TABLE public.ob IN ROW EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- MigrateV2(ctx, db, tb, V2Options{Shards: 8}) }()
	// The migrate is waiting for a lock (the table's, now).
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting bool
		if err := db.QueryRow(`SELECT EXISTS (SELECT FROM pg_locks WHERE NOT granted)`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the migrate never waited for the producer's transaction")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := tx.Exec(fmt.Sprintf(insertV2, tb.Qualified()), "e1", "a", 1); err != nil {
		t.Fatalf("the producer's INSERT beside the migrate: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("the producer's commit: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the migrate beside the producer: %v", err)
	}
}
