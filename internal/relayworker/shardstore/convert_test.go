package shardstore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// A table whose shard state is the shard table of an earlier build (one row per
// shard, updated in place by every advance) is converted by migrate with each cursor
// and lease where it stood: a window read in parts goes on after its pos against its
// fixed hi tick, so every event is published exactly once across the conversion. The
// earlier build's statements fail on the converted table instead of writing where no
// reader looks, and VerifyV2 sends a worker of this build to migrate first.
func TestMigrateConvertsAnEarlierBuildsShardTable(t *testing.T) {
	f := newFixture(t, 1) // one shard: its window is read in parts
	for i := range 30 {
		f.insert(f.db, fmt.Sprintf("e%02d", i), fmt.Sprintf("a%d", i%5), i/5+1)
	}
	old := f.worker("old")
	old.rebalance()
	if _, rec, err := old.st.Tick(ctx, old.leases.Tokens()); err != nil || !rec {
		t.Fatalf("tick: recorded %v, %v", rec, err)
	}
	if b, adv, _ := old.batch(10); len(b.Events) != 10 || b.Windows[0].Done || len(adv.Shards) != 1 {
		t.Fatalf("first part: %d events, windows %+v, advanced %+v", len(b.Events), b.Windows, adv)
	}
	var lo, hi, pos int64
	var owner string
	if err := f.db.QueryRow(`SELECT owner, lo_tick, hi_tick, pos FROM ob_shard`).Scan(&owner, &lo, &hi, &pos); err != nil {
		t.Fatal(err)
	}
	old.close()

	// The earlier build's layout, holding this state.
	if _, err := f.db.Exec(`CREATE TABLE ob_shard_earlier AS SELECT shard, owner, lease_until, lo_tick, hi_tick, pos FROM ob_shard;
DROP VIEW ob_status; DROP VIEW ob_shard; DROP TABLE ob_lease, ob_token, ob_cursor;
ALTER TABLE ob_shard_earlier RENAME TO ob_shard;
ALTER TABLE ob_shard ADD PRIMARY KEY (shard)`); err != nil {
		t.Fatal(err)
	}
	if _, err := schema.VerifyV2(ctx, f.db, f.tb, 1); err == nil || !strings.Contains(err.Error(), "run `relayworker migrate`, which converts it") {
		t.Fatalf("VerifyV2 on the earlier layout = %v", err)
	}
	if err := schema.MigrateV2(ctx, f.db, f.tb, schema.V2Options{Shards: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := schema.VerifyV2(ctx, f.db, f.tb, 1); err != nil {
		t.Fatal(err)
	}
	var owner2 string
	var lo2, hi2, pos2 int64
	if err := f.db.QueryRow(`SELECT owner, lo_tick, hi_tick, pos FROM ob_shard`).Scan(&owner2, &lo2, &hi2, &pos2); err != nil {
		t.Fatal(err)
	}
	if owner2 != owner || lo2 != lo || hi2 != hi || pos2 != pos {
		t.Fatalf("after the conversion: owner %s, cursor (%d, %d, %d); before: %s, (%d, %d, %d)", owner2, lo2, hi2, pos2, owner, lo, hi, pos)
	}
	if _, err := f.db.Exec(`UPDATE ob_shard SET pos = 1`); err == nil {
		t.Fatal("an earlier build's advance (UPDATE of the shard table) succeeded on the converted table")
	}
	var status int
	if err := f.db.QueryRow(`SELECT count(*) FROM ob_status WHERE status = 'SENT'`).Scan(&status); err != nil || status != 10 {
		t.Fatalf("status view after the conversion: %d SENT, %v; want 10", status, err)
	}

	// The old worker is gone; its lease runs out and a worker of this build goes on.
	if _, err := f.db.Exec(`UPDATE ob_token SET lease_until = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	w := f.worker("new")
	w.rebalance()
	if w.leases.Len() != 1 {
		t.Fatalf("the new worker holds %d shards", w.leases.Len())
	}
	w.drain(10)
	all := append(old.published, w.published...)
	if len(all) != 30 {
		t.Fatalf("published %d events across the conversion, want 30 once each", len(all))
	}
	f.checkDelivery(all)
}
