package archive

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardstore"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// v2fix is a v2 table of its own and one worker's shard store: the cursors move
// only through the relay's own statements (tick, read, fenced advance).
type v2fix struct {
	t      *testing.T
	dsn    string
	db     *sql.DB
	tbl    pgident.Table
	n      int
	st     *shardstore.Store
	leases shardstore.Leases
	// read is every event the worker read and "published", in order.
	read []string
}

const old = 48 * time.Hour

func newV2(t *testing.T, shards int) *v2fix {
	t.Helper()
	dsn, db := relaytest.PG.OpenDatabase(t)
	tbl := pgident.Table{Schema: "public", Name: "ob"}
	if err := schema.MigrateV2(context.Background(), db, tbl, schema.V2Options{Shards: shards}); err != nil {
		t.Fatal(err)
	}
	st, err := shardstore.New(db, shardstore.Options{Table: tbl, Shards: shards, WorkerID: "w1", Lease: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	f := &v2fix{t: t, dsn: dsn, db: db, tbl: tbl, n: shards, st: st}
	if _, err := st.Rebalance(context.Background(), &f.leases); err != nil || f.leases.Len() != shards {
		t.Fatalf("leases %d of %d: %v", f.leases.Len(), shards, err)
	}
	return f
}

// agg is an aggregate id of type order that hashes to shard.
func (f *v2fix) agg(shard int) string {
	f.t.Helper()
	var a string
	if err := f.db.QueryRow(`SELECT 'agg-' || g FROM generate_series(1, 100000) g
WHERE (hashtextextended('order/agg-' || g, 0) & $1) = $2 ORDER BY g LIMIT 1`, f.n-1, shard).Scan(&a); err != nil {
		f.t.Fatal(err)
	}
	return a
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insert is a producer's INSERT with created_at age ago.
func (f *v2fix) insert(q execer, id, agg string, version int, age time.Duration) {
	f.t.Helper()
	if _, err := q.ExecContext(context.Background(), `INSERT INTO ob (event_id, aggregate_type, aggregate_id, aggregate_version,
    event_type, destination, message_key, payload, created_at)
VALUES ($1, 'order', $2, $3, 'order.changed', 'orders', $2, '{}', now() - make_interval(secs => $4))`,
		id, agg, version, age.Seconds()); err != nil {
		f.t.Fatalf("insert %s: %v", id, err)
	}
}

func (f *v2fix) tick() {
	f.t.Helper()
	if _, _, err := f.st.Tick(context.Background(), f.leases.Tokens()); err != nil {
		f.t.Fatal(err)
	}
}

// relay reads one batch from shard from (at most limit events), "publishes" every
// event and advances with holds; false when there was nothing to read.
func (f *v2fix) relay(from int16, limit int, holds ...shardstore.Hold) bool {
	f.t.Helper()
	b, err := f.st.Read(context.Background(), f.leases.Tokens(), from, limit)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(b.Windows) == 0 {
		return false
	}
	a := shardstore.Advance{Windows: b.Windows, Holds: holds}
	held := map[string]bool{}
	for _, h := range holds {
		held[h.EventID] = true
	}
	for _, e := range b.Events {
		f.read = append(f.read, e.EventID)
		if !held[e.EventID] {
			a.Partitions, a.Offsets, a.Seqs = append(a.Partitions, 0), append(a.Offsets, e.Seq), append(a.Seqs, e.Seq)
		}
	}
	if adv, err := f.st.Advance(context.Background(), a); err != nil || len(adv.Shards) != len(b.Windows) {
		f.t.Fatalf("advance: %+v %v", adv, err)
	}
	return true
}

// catchUp ticks and relays until every window is read.
func (f *v2fix) catchUp() {
	f.t.Helper()
	f.tick()
	for i := 0; f.relay(0, 1000); i++ {
		if i > 100 {
			f.t.Fatal("the relay does not catch up")
		}
	}
}

func (f *v2fix) run(mode string) Result {
	f.t.Helper()
	res, err := Run(context.Background(), f.db, Options{Table: f.tbl, DSN: f.dsn, Mode: mode, BatchSize: 2,
		SentRetention: time.Hour, DeadRetention: 24 * time.Hour}, logr.Discard())
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

func (f *v2fix) left(table string) map[string]bool {
	f.t.Helper()
	return statuses(f.t, f.db, table)
}

func wantIDs(t *testing.T, what string, got map[string]bool, want ...string) {
	t.Helper()
	ok := len(got) == len(want)
	for _, w := range want {
		ok = ok && got[w]
	}
	if !ok {
		t.Errorf("%s: %v, want %v", what, got, want)
	}
}

// TestV2RetentionKeepsWhatALaggingShardHasNotPassed (issue 21): shard 0's cursor is
// ahead (its window read in part: pos), shard 1's is behind (never read). Only old
// rows shard 0 has passed go; shard 1's old rows, shard 0's rows after pos, and rows
// committed after the window's tick stay, until the relay passes them.
func TestV2RetentionKeepsWhatALaggingShardHasNotPassed(t *testing.T) {
	f := newV2(t, 2)
	a, b := f.agg(0), f.agg(1)
	for v := 1; v <= 4; v++ {
		f.insert(f.db, fmt.Sprintf("a%d", v), a, v, old)
		f.insert(f.db, fmt.Sprintf("b%d", v), b, v, old)
	}
	f.tick()
	f.insert(f.db, "a-late", a, 5, old) // after the tick: in no window read so far
	f.insert(f.db, "a-young", a, 6, 0)  // last in seq order: a young row holds back the rows after it
	if !f.relay(0, 3) {                 // a1..a3 of shard 0's window (a4 left)
		t.Fatal("nothing read")
	}
	res := f.run("delete")
	wantIDs(t, "outbox after the first run", f.left("ob"), "a4", "a-young", "a-late", "b1", "b2", "b3", "b4")
	if res.SentMoved != 3 {
		t.Errorf("moved %d, want 3", res.SentMoved)
	}

	// The relay catches up: every old row it passed goes, the young one stays.
	f.catchUp()
	f.catchUp() // a-late's window
	f.run("delete")
	wantIDs(t, "outbox after the catch-up", f.left("ob"), "a-young")
	if len(f.read) != 10 {
		t.Errorf("the relay read %v, want all ten events", f.read)
	}
}

// TestV2RetentionKeepsALateCommitInsideAReadPart: a transaction that drew a lower seq
// than the rows read so far and committed after the window's tick is below pos but
// not in the window (not visible in hi): it is not passed, and the rows after it wait
// with it (a shard's rows go in seq order). After the relay read it, all go.
func TestV2RetentionKeepsALateCommitInsideAReadPart(t *testing.T) {
	f := newV2(t, 1)
	tx, err := f.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // committed below
	f.insert(tx, "x0", "late", 1, old)
	for i := 1; i <= 3; i++ {
		f.insert(f.db, fmt.Sprintf("x%d", i), fmt.Sprintf("agg-%d", i), 1, old)
	}
	f.tick()
	f.relay(0, 2) // x1, x2: pos = x2's seq, above x0's
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if res := f.run("delete"); res.SentMoved != 0 {
		t.Errorf("moved %d before x0 was read", res.SentMoved)
	}
	wantIDs(t, "outbox", f.left("ob"), "x0", "x1", "x2", "x3")

	f.catchUp() // x3, closing the window
	f.catchUp() // x0's window
	if res := f.run("delete"); res.SentMoved != 4 {
		t.Errorf("moved %d, want 4", res.SentMoved)
	}
	wantIDs(t, "outbox", f.left("ob"))
	if len(f.read) != 4 {
		t.Errorf("the relay read %v", f.read)
	}
}

// TestV2ArchiveModeHoldAndBatchLog: archive mode copies passed rows (state PASSED)
// and DEAD hold rows past the dead retention (state DEAD) into <table>_archive;
// RETRY hold rows stay whatever their age; batch log rows older than the retention
// go, newer ones stay.
func TestV2ArchiveModeHoldAndBatchLog(t *testing.T) {
	f := newV2(t, 1)
	f.insert(f.db, "dead", "d", 1, old)
	f.insert(f.db, "retry", "r", 1, old)
	f.insert(f.db, "sent", "s", 1, old)
	f.tick()
	f.relay(0, 100,
		shardstore.Hold{EventID: "dead", State: schema.StatusDead, Attempts: 1, Code: "REJECTED", Message: "no"},
		shardstore.Hold{EventID: "retry", State: schema.StatusRetry, Attempts: 1, RetryIn: time.Hour, Code: "X", Message: "later"})
	for _, q := range []string{
		`UPDATE ob_hold SET updated_at = now() - interval '48 hours'`,
		`UPDATE ob_batch SET at = now() - interval '48 hours'`,
	} {
		if _, err := f.db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	f.insert(f.db, "new", "n", 1, 0)
	f.catchUp() // a recent batch row

	res := f.run("archive")
	if res.SentMoved != 3 || res.DeadMoved != 1 || res.BatchLogTrims != 1 {
		t.Errorf("result %+v, want 3 passed, 1 dead, 1 batch row", res)
	}
	wantIDs(t, "outbox", f.left("ob"), "new")
	wantIDs(t, "hold", f.left("ob_hold"), "retry")
	var batches int
	if err := f.db.QueryRow(`SELECT count(*) FROM ob_batch`).Scan(&batches); err != nil || batches != 1 {
		t.Errorf("batch log rows %d (%v), want the recent one", batches, err)
	}
	rows, err := f.db.Query(`SELECT event_id || ':' || state || ':' || COALESCE(last_error_code, '-') FROM ob_archive ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	want := []string{"dead:DEAD:REJECTED", "dead:PASSED:-", "retry:PASSED:-", "sent:PASSED:-"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("archive %v, want %v", got, want)
	}
}

// TestV2ArchiveModeRefusesAMissingArchive: a v2 table made before its migrate created
// <table>_archive gets one line naming the fix, and nothing is deleted.
func TestV2ArchiveModeRefusesAMissingArchive(t *testing.T) {
	f := newV2(t, 1)
	f.insert(f.db, "e1", "a", 1, old)
	f.catchUp()
	if _, err := f.db.Exec(`DROP TABLE ob_archive`); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), f.db, Options{Table: f.tbl, DSN: f.dsn, Mode: "archive", BatchSize: 2,
		SentRetention: time.Hour, DeadRetention: 24 * time.Hour}, logr.Discard())
	if err == nil || !strings.Contains(err.Error(), "run `relayworker migrate --contract v2`") {
		t.Fatalf("err %v, want the migrate hint", err)
	}
	wantIDs(t, "outbox", f.left("ob"), "e1")
}
