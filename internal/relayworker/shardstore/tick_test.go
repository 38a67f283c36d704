package shardstore

import (
	"fmt"
	"testing"
)

// Ticks are recorded only when needed, idle windows are closed after IdleTicks ticks,
// and the tick table keeps only what some window still starts at: it stays bounded
// while one shard is busy and the others idle.
func TestTickRecordsOnlyWhenNeededAndTrims(t *testing.T) {
	f := newFixture(t, 4)
	w := f.worker("w1")
	w.rebalance()
	if _, rec, err := w.st.Tick(ctx); err != nil || rec {
		t.Fatalf("tick on an empty table: recorded %v, %v", rec, err)
	}
	hot := f.sameShard(1)[0]
	for v := 1; v <= 3*IdleTicks; v++ {
		f.insert(f.db, fmt.Sprintf("h%03d", v), hot, v)
		w.drain(100)
	}
	var ticks, idleBehind int
	// Housekeeping runs every IdleTicks-th tick: an idle window lags at most
	// 2 x IdleTicks ticks, and so does the tick table.
	if err := f.db.QueryRow(`SELECT (SELECT count(*) FROM ob_tick),
       (SELECT count(*) FROM ob_shard WHERE lo_tick < (SELECT max(tick) FROM ob_tick) - $1)`, 2*IdleTicks).Scan(&ticks, &idleBehind); err != nil {
		t.Fatal(err)
	}
	if ticks > 2*IdleTicks+1 || idleBehind != 0 {
		t.Fatalf("after %d busy ticks: %d ticks kept, %d windows more than %d ticks behind", 3*IdleTicks, ticks, idleBehind, 2*IdleTicks)
	}
	for tick, want := range map[int64]bool{1: false, IdleTicks - 1: false, IdleTicks: true, 2 * IdleTicks: true, 2*IdleTicks + 1: false} {
		if got := housekeeping(tick); got != want {
			t.Errorf("housekeeping(%d) = %v, want %v", tick, got, want)
		}
	}
	if len(w.published) != 3*IdleTicks {
		t.Fatalf("published %d", len(w.published))
	}
	f.checkDelivery(w.published)
}
