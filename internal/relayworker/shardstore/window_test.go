package shardstore

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"
)

// wantRead drains with w and checks which events it newly published (any order).
func wantRead(t *testing.T, w *worker, when string, want ...string) {
	t.Helper()
	before := len(w.published)
	w.drain(1) // batches of one: every window is read in parts
	got := strings.Join(sortedIDs(w.published[before:]), ",")
	if got != strings.Join(want, ",") {
		t.Fatalf("%s: read [%s], want [%s]", when, got, strings.Join(want, ","))
	}
}

func begin(t *testing.T, db *sql.DB) *sql.Tx {
	t.Helper()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

func commit(t *testing.T, tx *sql.Tx) {
	t.Helper()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// A transaction with a lower txid that commits a higher version of an aggregate
// later is read in the window its commit falls in, not skipped; so is one with a
// lower txid and a lower seq in the same shard (the loss of a "txid < xmin" or
// "highest seq seen" cursor).
func TestLateLowerTxidIsReadInALaterWindow(t *testing.T) {
	f := newFixture(t, 256)
	w := f.worker("w1")
	w.rebalance()
	aggs := f.sameShard(3)

	// Lower txid, higher version.
	early := begin(t, f.db)
	if _, err := early.Exec(`SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	f.insert(f.db, "x-v1", aggs[0], 1) // higher txid, commits first
	wantRead(t, w, "after v1", "x-v1")
	f.insert(early, "x-v2", aggs[0], 2)
	wantRead(t, w, "while v2's transaction is open")
	commit(t, early)
	wantRead(t, w, "after v2's late commit", "x-v2")

	// Lower txid and lower seq, same shard, commits after a higher one was published.
	late := begin(t, f.db)
	f.insert(late, "late", aggs[1], 1)
	f.insert(f.db, "later", aggs[2], 1)
	wantRead(t, w, "after the higher one", "later")
	commit(t, late)
	wantRead(t, w, "after the late commit", "late")
	var lower bool
	if err := f.db.QueryRow(`SELECT a.txid < b.txid AND a.seq < b.seq AND a.shard = b.shard FROM ob a, ob b
WHERE a.event_id = 'late' AND b.event_id = 'later'`).Scan(&lower); err != nil || !lower {
		t.Fatalf("scenario: late has a lower txid and seq in the same shard: %v, %v", lower, err)
	}
	if err := f.db.QueryRow(`SELECT a.txid > b.txid FROM ob a, ob b WHERE a.event_id = 'x-v1' AND b.event_id = 'x-v2'`).Scan(&lower); err != nil || !lower {
		t.Fatalf("scenario: v2 has the lower txid: %v, %v", lower, err)
	}
	f.checkDelivery(w.published)
}

// A long write transaction elsewhere in the cluster (it has a txid, no outbox row)
// holds nothing back, and an idle table gets no ticks while it runs.
func TestLongTransactionElsewhereDoesNotHoldReadsBack(t *testing.T) {
	f := newFixture(t, 256)
	w := f.worker("w1")
	w.rebalance()
	long := begin(t, f.db)
	if _, err := long.Exec(`CREATE TEMP TABLE busy (x int); INSERT INTO busy VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 10 {
		id := fmt.Sprintf("e%d", i)
		f.insert(f.db, id, fmt.Sprintf("a%d", i%3), i/3+1)
		want = append(want, id)
	}
	wantRead(t, w, "with a long transaction open", want...)
	if _, rec, err := w.st.Tick(ctx, w.leases.Tokens()); err != nil || rec {
		t.Fatalf("tick on an idle table with a long transaction open: recorded %v, %v", rec, err)
	}
	commit(t, long)
	wantRead(t, w, "after the long transaction")
	f.checkDelivery(w.published)
}

// A prepared transaction's rows stay out of every window until COMMIT PREPARED,
// then are read.
func TestPreparedTransactionIsReadAfterCommitPrepared(t *testing.T) {
	f := newFixture(t, 256)
	w := f.worker("w1")
	w.rebalance()
	conn, err := f.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	f.insert(conn, "prepared", "p", 1)
	if _, err := conn.ExecContext(ctx, `PREPARE TRANSACTION 'outbox_p1'`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = f.db.Exec(`ROLLBACK PREPARED 'outbox_p1'`) })
	f.insert(f.db, "after", "q", 1)
	wantRead(t, w, "while prepared", "after")
	if _, err := f.db.Exec(`COMMIT PREPARED 'outbox_p1'`); err != nil {
		t.Fatal(err)
	}
	wantRead(t, w, "after COMMIT PREPARED", "prepared")
	f.checkDelivery(w.published)
}

// Rows inserted only inside subtransactions carry the top-level txid and are read
// when it commits; a rolled-back savepoint's row is not.
func TestSubtransactionRowsAreRead(t *testing.T) {
	f := newFixture(t, 256)
	w := f.worker("w1")
	w.rebalance()
	tx := begin(t, f.db)
	for _, q := range []string{`SAVEPOINT a`} {
		if _, err := tx.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	f.insert(tx, "sub-1", "s", 1)
	if _, err := tx.Exec(`RELEASE SAVEPOINT a; SAVEPOINT b`); err != nil {
		t.Fatal(err)
	}
	f.insert(tx, "rolled-back", "s", 2)
	if _, err := tx.Exec(`ROLLBACK TO SAVEPOINT b; SAVEPOINT c`); err != nil {
		t.Fatal(err)
	}
	f.insert(tx, "sub-2", "s", 2)
	wantRead(t, w, "before the commit")
	commit(t, tx)
	wantRead(t, w, "after the commit", "sub-1", "sub-2")
	f.checkDelivery(w.published)
}

// One hot aggregate (every event in one shard) is read in parts, in order, also while
// new versions arrive between the parts (they wait for the next window).
func TestHotAggregateIsReadInPartsInOrder(t *testing.T) {
	f := newFixture(t, 256)
	w := f.worker("w1")
	w.rebalance()
	for v := 1; v <= 40; v++ {
		f.insert(f.db, fmt.Sprintf("hot-%02d", v), "hot", v)
	}
	if _, _, err := w.st.Tick(ctx, w.leases.Tokens()); err != nil {
		t.Fatal(err)
	}
	parts, v := 0, 41
	for {
		b, _, any := w.batch(7)
		if !any {
			break
		}
		if len(b.Windows) != 1 {
			t.Fatalf("one hot shard, %d windows", len(b.Windows))
		}
		if !b.Windows[0].Done {
			parts++
		}
		if v <= 45 { // new versions while the window is read in parts
			f.insert(f.db, fmt.Sprintf("hot-%02d", v), "hot", v)
			v++
		}
	}
	if parts < 5 {
		t.Fatalf("read in %d parts, want at least 5 (40 events, batches of 7)", parts)
	}
	if len(w.published) != 40 {
		t.Fatalf("the first window had %d events, want the 40 before its tick", len(w.published))
	}
	for ; v <= 50; v++ {
		f.insert(f.db, fmt.Sprintf("hot-%02d", v), "hot", v)
	}
	w.drain(7)
	if len(w.published) != 50 {
		t.Fatalf("published %d, want 50", len(w.published))
	}
	for i, e := range w.published {
		if e.AggregateVersion != int64(i+1) {
			t.Fatalf("publish %d is version %d", i, e.AggregateVersion)
		}
	}
	f.checkDelivery(w.published)
}

// A full drain by two workers changes no outbox row: the outbox table's n_tup_upd and
// n_tup_del stay 0 (the relay's writes go to the side tables).
func TestDrainWritesNothingToTheOutboxTable(t *testing.T) {
	f := newFixture(t, 256)
	const n = 600
	for i := range n {
		f.insert(f.db, fmt.Sprintf("e%04d", i), fmt.Sprintf("a%d", i%50), i/50+1)
	}
	a, b := f.worker("a"), f.worker("b")
	a.rebalance()
	b.rebalance()
	a.rebalance() // a gives b its half at a window boundary
	b.rebalance()
	if a.leases.Len()+b.leases.Len() != 256 || a.leases.Len() != 128 {
		t.Fatalf("a holds %d, b %d shards", a.leases.Len(), b.leases.Len())
	}
	for range 3 {
		a.drain(100)
		b.drain(100)
	}
	f.checkDelivery(append(a.published, b.published...))
	if len(a.published)+len(b.published) != n {
		t.Fatalf("published %d events, want %d once each", len(a.published)+len(b.published), n)
	}
	a.close()
	b.close() // their backends exit and flush their statistics
	if _, err := f.db.Exec(`SELECT pg_stat_force_next_flush()`); err != nil && !strings.Contains(err.Error(), "does not exist") {
		t.Fatal(err) // PostgreSQL 15+; 13 and 14 flush within a poll
	}
	var ins, updDel, cursorIns, leaseUpd int64
	eventually(t, 30*time.Second, "statistics flushed", func() bool {
		if err := f.db.QueryRow(`SELECT o.n_tup_ins, o.n_tup_upd + o.n_tup_del, c.n_tup_ins, l.n_tup_upd
FROM pg_stat_user_tables o, pg_stat_user_tables c, pg_stat_user_tables l
WHERE o.relname = 'ob' AND c.relname = 'ob_cursor' AND l.relname = 'ob_lease'`).Scan(&ins, &updDel, &cursorIns, &leaseUpd); err != nil {
			t.Fatal(err)
		}
		return ins == n && cursorIns > 256
	})
	if updDel != 0 {
		t.Fatalf("outbox table n_tup_upd + n_tup_del = %d after the drain, want 0", updDel)
	}
	// The lease rows change only when a lease is taken or given up (a's 256, its 128
	// given to b, b's 128), never per batch: the advances inserted cursor rows.
	if leaseUpd > 512 {
		t.Fatalf("lease table n_tup_upd = %d after the drain, want at most 512 (no update per batch)", leaseUpd)
	}
}

// A producer that took the newest transaction id (at or above the snapshot's xmax,
// so not in PostgreSQL's xip list) and drew its seq before a tick, then commits after
// the tick, is read in the next window: the tick names such ids as running
// (schema.TickSnapshot). Without that its row had seq <= lo.seq_before and was not in
// lo's xip, so it fell in no window once the shard's window closed at that tick.
func TestTransactionAboveTheTicksXmaxIsRead(t *testing.T) {
	f := newFixture(t, 1)
	w := f.worker("w1")
	w.rebalance()
	early, late := begin(t, f.db), begin(t, f.db)
	f.insert(early, "early", "a", 1)
	f.insert(late, "late", "b", 1) // the newest id: nothing newer completes before the tick
	commit(t, early)
	wantRead(t, w, "after early's commit (the window closes at this tick)", "early")
	commit(t, late)
	f.insert(f.db, "after", "c", 1)
	wantRead(t, w, "after late's commit", "after", "late")
}

// A long and a prepared producer transaction, each the only writer of its shard, stay
// open while another shard ticks on for more than IdleTicks ticks: the idle close
// moves their shards' windows past them (their rows are invisible, so the windows are
// empty), and their rows are still read after COMMIT and COMMIT PREPARED, through the
// newer lo tick's xip list.
func TestIdleCloseOverAnOpenTransactionKeepsItsRows(t *testing.T) {
	f := newFixture(t, 4)
	w := f.worker("w1")
	w.rebalance()
	shardOf := func(agg string) (s int) {
		if err := f.db.QueryRow(`SELECT (hashtextextended('order/' || $1, 0) & 3)::int`, agg).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	hot := f.sameShard(1)[0]
	var quiet []string // two aggregates of two other shards
	for i := 0; len(quiet) < 2; i++ {
		a := fmt.Sprintf("q%d", i)
		if s := shardOf(a); s != shardOf(hot) && (len(quiet) == 0 || s != shardOf(quiet[0])) {
			quiet = append(quiet, a)
		}
	}
	f.insert(f.db, "h000", hot, 1)
	wantRead(t, w, "before the transactions", "h000")

	long := begin(t, f.db)
	f.insert(long, "long", quiet[0], 1)
	conn, err := f.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	f.insert(conn, "prepared", quiet[1], 1)
	if _, err := conn.ExecContext(ctx, `PREPARE TRANSACTION 'outbox_idle'`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = f.db.Exec(`ROLLBACK PREPARED 'outbox_idle'`) })

	var from int
	if err := f.db.QueryRow(`SELECT max(tick) FROM ob_tick`).Scan(&from); err != nil {
		t.Fatal(err)
	}
	for v := 2; v <= 2*IdleTicks+2; v++ {
		id := fmt.Sprintf("h%03d", v)
		f.insert(f.db, id, hot, v)
		wantRead(t, w, "the hot shard with the transactions open", id)
	}
	var moved int
	if err := f.db.QueryRow(`SELECT count(*) FROM ob_shard WHERE shard IN ($1, $2) AND lo_tick > $3`,
		shardOf(quiet[0]), shardOf(quiet[1]), from).Scan(&moved); err != nil || moved != 2 {
		t.Fatalf("the idle close moved %d of the two quiet shards' windows past the open transactions: %v", moved, err)
	}
	commit(t, long)
	if _, err := f.db.Exec(`COMMIT PREPARED 'outbox_idle'`); err != nil {
		t.Fatal(err)
	}
	wantRead(t, w, "after COMMIT and COMMIT PREPARED", "long", "prepared")
	f.checkDelivery(w.published)
}
