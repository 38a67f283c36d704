package shardstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// Ticks are recorded only when needed, idle windows are closed after IdleTicks ticks,
// and the tick table keeps only what some window still starts at: it stays bounded
// while one shard is busy and the others idle.
func TestTickRecordsOnlyWhenNeededAndTrims(t *testing.T) {
	f := newFixture(t, 4)
	w := f.worker("w1")
	w.rebalance()
	if _, rec, err := w.st.Tick(ctx, w.leases.Tokens()); err != nil || rec {
		t.Fatalf("tick on an empty table: recorded %v, %v", rec, err)
	}
	hot := f.sameShard(1)[0]
	for v := 1; v <= 3*IdleTicks; v++ {
		f.insert(f.db, fmt.Sprintf("h%03d", v), hot, v)
		w.drain(100)
	}
	var ticks, idleBehind int
	// Housekeeping runs every IdleTicks ticks: an idle window lags at most
	// 2 x IdleTicks ticks, and so does the tick table.
	if err := f.db.QueryRow(`SELECT (SELECT count(*) FROM ob_tick),
       (SELECT count(*) FROM ob_shard WHERE lo_tick < (SELECT max(tick) FROM ob_tick) - $1)`, 2*IdleTicks).Scan(&ticks, &idleBehind); err != nil {
		t.Fatal(err)
	}
	if ticks > 2*IdleTicks+1 || idleBehind != 0 {
		t.Fatalf("after %d busy ticks: %d ticks kept, %d windows more than %d ticks behind", 3*IdleTicks, ticks, idleBehind, 2*IdleTicks)
	}
	s := time.Second
	for _, c := range []struct {
		newest, last int64
		since        time.Duration
		want         bool
	}{
		{1, 0, s, false}, {IdleTicks - 1, 0, s, false}, {IdleTicks, 0, s, true}, {2*IdleTicks - 1, IdleTicks, s, false},
		{2*IdleTicks + 3, IdleTicks, s, true}, {2*IdleTicks + 3, IdleTicks, s - 1, false}, {1000 * IdleTicks, 0, s / 2, false},
	} {
		if got := housekeepingDue(c.newest, c.last, c.since, time.Second); got != c.want {
			t.Errorf("housekeepingDue(%d, %d, %s, 1s) = %v, want %v", c.newest, c.last, c.since, got, c.want)
		}
	}
	if len(w.published) != 3*IdleTicks {
		t.Fatalf("published %d", len(w.published))
	}
	f.checkDelivery(w.published)
}

// A PostgreSQL crash can lose an asynchronously committed tick that a surviving
// worker read a window up to; after the restart a new tick takes its number with a
// later snapshot. Simulated here: the tick row is deleted and another with the same
// number, a later snapshot and a later at is inserted, after a second event of the
// same shard committed. The advance of the batch read under the lost tick must move
// nothing (without the stamp check it closes the window at the new tick and the
// second event, never read, is skipped); it reports the shard stale, not lost, and
// the next read returns both events.
func TestAdvanceNamingARenumberedTickMovesNothing(t *testing.T) {
	f := newFixture(t, 1)
	w := f.worker("w1")
	w.rebalance()
	aggs := f.sameShard(1)
	f.insert(f.db, "e1", aggs[0], 1)
	tick, rec, err := w.st.Tick(ctx, w.leases.Tokens())
	if err != nil || !rec {
		t.Fatalf("tick: %d %v %v", tick, rec, err)
	}
	b, err := w.st.Read(ctx, w.leases.Tokens(), 0, 100)
	if err != nil || len(b.Events) != 1 || b.Windows[0].HiTick != tick {
		t.Fatalf("read under tick %d: %+v, %v", tick, b, err)
	}
	f.insert(f.db, "e2", aggs[0], 2)
	if _, err := f.db.Exec(`DELETE FROM ob_tick WHERE tick = $1`, tick); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec(`INSERT INTO ob_tick (tick, snap, snap_xmax, seq_before, seq_after, at)
SELECT $1, ts.snap, pg_snapshot_xmax(ts.snap), (SELECT last_value FROM ob_seq), (SELECT last_value FROM ob_seq),
       now() + interval '1 second'
FROM (SELECT `+schema.TickSnapshot+` AS snap) ts`, tick); err != nil {
		t.Fatal(err)
	}
	adv, err := w.st.Advance(ctx, Advance{Windows: b.Windows, Partitions: []int32{0}, Offsets: []int64{1}, Seqs: []int64{b.Events[0].Seq}})
	if err != nil {
		t.Fatal(err)
	}
	if len(adv.Shards) != 0 || len(adv.Stale) != 1 || adv.Stale[0] != b.Windows[0].Shard || adv.Batch != 0 {
		t.Fatalf("advance naming the lost tick: moved %v, stale %v, batch %d; want nothing moved, shard %d stale",
			adv.Shards, adv.Stale, adv.Batch, b.Windows[0].Shard)
	}
	if w.leases.Len() != 1 {
		t.Fatalf("a stale shard's lease was dropped: %d held", w.leases.Len())
	}
	wantRead(t, w, "after the stale advance", "e1", "e2")
}

// The idle close never waits for a shard row another transaction holds (an owner's
// advance, which updates several shard rows): it leaves that shard for a later round
// and closes the others. Waiting made the two deadlock (they took their rows in
// different orders), and PostgreSQL broke the cycle only after deadlock_timeout: a
// one-second stall of every worker, several times a minute at 1,000 events/s.
func TestIdleCloseSkipsAShardRowAnotherTransactionHolds(t *testing.T) {
	f := newFixture(t, 4)
	w := f.worker("w1")
	w.rebalance()
	hot := f.sameShard(1)[0]
	for v := 1; v <= 3; v++ {
		f.insert(f.db, fmt.Sprintf("h%d", v), hot, v)
		w.drain(100)
	}
	var held int16
	if err := f.db.QueryRow(`SELECT shard FROM ob_shard WHERE shard <> (SELECT shard FROM ob WHERE event_id = 'h1')
ORDER BY shard LIMIT 1`).Scan(&held); err != nil {
		t.Fatal(err)
	}
	tx := begin(t, f.db)
	defer tx.Rollback() //nolint:errcheck // committed below
	if _, err := tx.ExecContext(ctx, `UPDATE ob_lease SET owner = owner WHERE shard = $1`, held); err != nil {
		t.Fatal(err)
	}

	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := f.db.ExecContext(c, closeIdleSQL(f.tb), int64(1)<<40, pq.Array(w.leases.Tokens())); err != nil {
		t.Fatalf("idle close beside a held shard row: %v (it waited for the row)", err)
	}
	behind := func() []int64 {
		var out []int64
		if err := f.db.QueryRow(`SELECT COALESCE(array_agg(shard ORDER BY shard), '{}') FROM ob_shard
WHERE lo_tick < (SELECT max(tick) FROM ob_tick)`).Scan(pq.Array(&out)); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := behind(); len(got) != 1 || got[0] != int64(held) {
		t.Fatalf("windows left behind the newest tick: %v, want only the held shard %d", got, held)
	}
	commit(t, tx)
	if _, err := f.db.ExecContext(ctx, closeIdleSQL(f.tb), int64(1)<<40, pq.Array(w.leases.Tokens())); err != nil {
		t.Fatal(err)
	}
	if got := behind(); len(got) != 0 {
		t.Fatalf("after the holder committed, windows still behind: %v", got)
	}
}

// A worker's idle close moves only the windows of the shards it holds: another
// worker's shard rows are that worker's to write (its advance would wait for this
// statement otherwise). Each worker closes its own.
func TestIdleCloseMovesOnlyTheCallersShards(t *testing.T) {
	f := newFixture(t, 4)
	a, b := f.worker("a"), f.worker("b")
	a.rebalance()
	b.rebalance()
	a.rebalance() // a releases two, b takes them
	b.rebalance()
	if a.leases.Len() != 2 || b.leases.Len() != 2 {
		t.Fatalf("a holds %d, b %d; want 2 each", a.leases.Len(), b.leases.Len())
	}
	for i := range IdleTicks + 1 {
		f.insert(f.db, fmt.Sprintf("t%d", i), fmt.Sprintf("agg-%d", i), 1)
		if _, _, err := a.st.Tick(ctx, nil); err != nil { // ticks, closes nothing
			t.Fatal(err)
		}
	}
	// Every window is now (first tick, newest] and, with the rows gone (a test's
	// shortcut: the relay never deletes them), empty: idle on both workers' shards.
	if _, err := f.db.Exec(`DELETE FROM ob`); err != nil {
		t.Fatal(err)
	}
	behind := func(w *worker) int {
		var n int
		if err := f.db.QueryRow(`SELECT count(*) FROM ob_shard WHERE lo_tick < (SELECT max(tick) FROM ob_tick) AND owner = ANY ($1)`,
			pq.Array(w.leases.Tokens())).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if ba, bb := behind(a), behind(b); ba != 2 || bb != 2 {
		t.Fatalf("idle windows behind the newest tick: a %d, b %d; want 2 each", ba, bb)
	}
	if _, err := f.db.ExecContext(ctx, closeIdleSQL(f.tb), int64(1)<<40, pq.Array(a.leases.Tokens())); err != nil {
		t.Fatal(err)
	}
	if ba, bb := behind(a), behind(b); ba != 0 || bb != 2 {
		t.Fatalf("after a's idle close: a %d behind, b %d; want a's closed and b's left", ba, bb)
	}
}

// A worker whose shards are all idle records no tick (the busy worker records each
// one first), yet its idle windows are closed and the tick table stays bounded: its
// housekeeping counts the newest tick, whoever recorded it.
func TestIdleWorkerThatRecordsNoTickClosesItsWindows(t *testing.T) {
	f := newFixture(t, 4)
	a, b := f.worker("a"), f.worker("b")
	a.rebalance()
	b.rebalance()
	a.rebalance()
	b.rebalance()
	var hot string // an aggregate of one of a's shards
	for _, agg := range f.sameShard(1) {
		hot = agg
	}
	var shard int16
	if err := f.db.QueryRow(`SELECT (hashtextextended('order/' || $1, 0) & 3)::smallint`, hot).Scan(&shard); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.leases.Token(shard); !ok {
		a, b = b, a // the hot shard is b's: swap the names
	}
	for v := 1; v <= 3*IdleTicks; v++ {
		f.insert(f.db, fmt.Sprintf("h%03d", v), hot, v)
		a.drain(100) // ticks and records
		if _, rec, err := b.st.Tick(ctx, b.leases.Tokens()); err != nil || rec {
			t.Fatalf("the idle worker's tick: recorded %v, %v; want nothing to record", rec, err)
		}
	}
	var ticks, behind int
	if err := f.db.QueryRow(`SELECT (SELECT count(*) FROM ob_tick),
       (SELECT count(*) FROM ob_shard WHERE owner = ANY ($1) AND lo_tick < (SELECT max(tick) FROM ob_tick) - $2)`,
		pq.Array(b.leases.Tokens()), 2*IdleTicks).Scan(&ticks, &behind); err != nil {
		t.Fatal(err)
	}
	if ticks > 2*IdleTicks+1 || behind != 0 {
		t.Fatalf("after %d ticks recorded by the busy worker: %d ticks kept, %d of the idle worker's windows more than %d behind",
			3*IdleTicks, ticks, behind, 2*IdleTicks)
	}
}

// Housekeeping trims the cursor log of the worker's shards to each shard's newest row
// (its cursor), and a later trim deletes what came since the last one kept (where it
// stopped, not from the shard's first row).
func TestHousekeepingTrimsTheCursorLog(t *testing.T) {
	f := newFixture(t, 4)
	w := f.worker("w")
	w.rebalance()
	perShard := func() (most, rows int) {
		t.Helper()
		if err := f.db.QueryRow(`SELECT COALESCE(max(n), 0), COALESCE(sum(n), 0) FROM (SELECT count(*) AS n FROM ob_cursor GROUP BY shard) c`).Scan(&most, &rows); err != nil {
			t.Fatal(err)
		}
		return most, rows
	}
	for round := range 3 {
		for i := range 40 {
			f.insert(f.db, fmt.Sprintf("r%d-e%02d", round, i), fmt.Sprintf("a%d", i%8), round*5+i/8+1)
		}
		w.drain(3) // a dozen advances or more
		if most, _ := perShard(); most < 2 {
			t.Fatalf("round %d: at most %d cursor rows per shard before the trim; the test needs more", round, most)
		}
		w.st.housekept.Store(-IdleTicks) // due at the next tick
		if _, _, err := w.st.Tick(ctx, w.leases.Tokens()); err != nil {
			t.Fatal(err)
		}
		w.st.background.Wait() // the trims run beside the loop
		if most, rows := perShard(); most != 1 || rows != 4 {
			t.Fatalf("round %d: after the trim %d cursor rows, at most %d per shard; want one per shard", round, rows, most)
		}
		if len(w.st.trims.cursors) != 4 {
			t.Fatalf("round %d: the trim remembered %d shards, want 4", round, len(w.st.trims.cursors))
		}
	}
	f.checkDelivery(w.published)
}

// The trims run beside the loop, and a failed one is not lost: the next Tick returns
// its error, once.
func TestAFailedTrimIsReturnedByTheNextTick(t *testing.T) {
	f := newFixture(t, 4)
	w := f.worker("w")
	w.rebalance()
	f.insert(f.db, "e1", "a", 1)
	w.drain(10)
	// The tick trim reads the shard view: without it the trim fails.
	if _, err := f.db.Exec(`DROP VIEW ob_status; DROP VIEW ob_shard`); err != nil {
		t.Fatal(err)
	}
	w.st.housekept.Store(-IdleTicks) // due at the next tick
	if _, _, err := w.st.Tick(ctx, w.leases.Tokens()); err != nil {
		t.Fatalf("the tick that started the trim: %v", err)
	}
	w.st.background.Wait()
	_, _, err := w.st.Tick(ctx, w.leases.Tokens())
	if err == nil || !strings.Contains(err.Error(), "tick: trim") {
		t.Fatalf("the next tick = %v, want the trim's error", err)
	}
	if _, _, err := w.st.Tick(ctx, w.leases.Tokens()); err != nil {
		t.Fatalf("the tick after it = %v, want nil (the error is returned once)", err)
	}
}

// The trims delete from where the last round stopped, and every FullTrimEvery-th
// round from each log's first row: rows that a trim lost in a PostgreSQL crash
// leaves behind (simulated: the deleted rows are put back after the round) stay
// through the rounds between and are deleted by the next full one.
func TestAFullTrimRoundDeletesWhatALostTrimLeft(t *testing.T) {
	f := newFixture(t, 4)
	w := f.worker("w")
	w.rebalance()
	for i := range 40 {
		f.insert(f.db, fmt.Sprintf("e%02d", i), fmt.Sprintf("a%d", i%8), i/8+1)
	}
	w.drain(3)
	w.st.background.Wait() // no trim of the loop's beside the rounds below
	if _, err := f.db.Exec(`CREATE TABLE lost_tick AS SELECT * FROM ob_tick;
		CREATE TABLE lost_cursor AS SELECT * FROM ob_cursor`); err != nil {
		t.Fatal(err)
	}
	below := func() (ticks, cursors int) {
		t.Helper()
		if err := f.db.QueryRow(`SELECT (SELECT count(*) FROM ob_tick WHERE tick < (SELECT min(lo_tick) FROM ob_shard)),
		       (SELECT count(*) - count(DISTINCT shard) FROM ob_cursor)`).Scan(&ticks, &cursors); err != nil {
			t.Fatal(err)
		}
		return ticks, cursors
	}
	round := func(full bool) {
		t.Helper()
		w.st.trims.rounds = 1 // not a multiple of FullTrimEvery: from the floors
		if full {
			w.st.trims.rounds = FullTrimEvery
		}
		if err := w.st.trims.round(ctx, w.st, w.leases.Tokens()); err != nil {
			t.Fatal(err)
		}
	}
	lost, lostCursors := below()
	if lost == 0 || lostCursors == 0 {
		t.Fatalf("%d ticks and %d cursor rows to trim; the test needs both", lost, lostCursors)
	}
	round(true)
	var lo int64
	if err := f.db.QueryRow(`SELECT min(lo_tick) FROM ob_shard`).Scan(&lo); err != nil {
		t.Fatal(err)
	}
	if ticks, cursors := below(); ticks != 0 || cursors != 0 || w.st.trims.tick != lo {
		t.Fatalf("after a full round: %d ticks and %d cursor rows left to trim, tick floor %d (min lo_tick %d)", ticks, cursors, w.st.trims.tick, lo)
	}
	if _, err := f.db.Exec(`INSERT INTO ob_tick SELECT * FROM lost_tick WHERE tick < ` + strconv.FormatInt(lo, 10) + `;
		INSERT INTO ob_cursor OVERRIDING SYSTEM VALUE SELECT * FROM lost_cursor l
		WHERE l.id < (SELECT max(id) FROM ob_cursor c WHERE c.shard = l.shard)`); err != nil {
		t.Fatal(err)
	}
	round(false)
	if ticks, cursors := below(); ticks != lost || cursors != lostCursors {
		t.Fatalf("a round from the floors deleted below them: %d of %d ticks and %d of %d cursor rows left", ticks, lost, cursors, lostCursors)
	}
	round(true)
	if ticks, cursors := below(); ticks != 0 || cursors != 0 {
		t.Fatalf("after the next full round: %d ticks and %d cursor rows left", ticks, cursors)
	}
	f.checkDelivery(w.published)
}
