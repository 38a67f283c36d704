package shardstore

import (
	"fmt"
	"testing"
)

// checkOwners asserts one owner per shard: every owned shard's token is in exactly
// one worker's leases and no two workers share a token; with all set, every shard is
// owned.
func checkOwners(t *testing.T, f *fixture, all bool, ws ...*worker) {
	t.Helper()
	tokenOf := map[string]string{}
	for _, w := range ws {
		for _, l := range w.leases.List() {
			if other, ok := tokenOf[l.Token]; ok && other != w.id {
				t.Fatalf("token %s is held by %s and %s", l.Token, other, w.id)
			}
			tokenOf[l.Token] = w.id
		}
	}
	rows, err := f.db.Query(`SELECT shard, COALESCE(owner, '') FROM ob_shard ORDER BY shard`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var shard int16
		var owner string
		if err := rows.Scan(&shard, &owner); err != nil {
			t.Fatal(err)
		}
		holders := 0
		for _, w := range ws {
			if tok, ok := w.leases.Token(shard); ok && tok == owner {
				holders++
			}
		}
		if holders > 1 || all && holders != 1 {
			t.Fatalf("shard %d (owner %q) has %d holders", shard, owner, holders)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// Shards move across 1 -> 3 -> 2 workers while events keep coming: each worker ends at
// its fair share, every shard has one token at every step, a stalled worker's advance
// after its leases were taken over moves nothing (and writes no hold row), and no
// event is lost or published out of order.
func TestShardsRebalanceAcross1To3To2Workers(t *testing.T) {
	f := newFixture(t, 64)
	a, b, c := f.worker("a"), f.worker("b"), f.worker("c")
	seq := 0
	produce := func(n int) {
		for range n {
			agg := seq % 40
			f.insert(f.db, fmt.Sprintf("e%05d", seq), fmt.Sprintf("a%02d", agg), seq/40+1)
			seq++
		}
	}
	all := func() []Event {
		return append(append(append([]Event{}, a.published...), b.published...), c.published...)
	}

	// One worker takes every shard.
	a.rebalance()
	checkOwners(t, f, true, a)
	if a.leases.Len() != 64 {
		t.Fatalf("alone, a holds %d of 64", a.leases.Len())
	}
	produce(200)
	a.batch(50)

	// Two more join: a gives up what is over ceil(64/3) = 22 at window boundaries,
	// b and c take it.
	b.rebalance()
	c.rebalance()
	checkOwners(t, f, false, a, b, c)
	for range 4 {
		for _, w := range []*worker{a, b, c} {
			w.rebalance()
			checkOwners(t, f, false, a, b, c)
			produce(20)
			w.batch(30)
		}
	}
	checkOwners(t, f, true, a, b, c)
	for _, w := range []*worker{a, b, c} {
		if w.leases.Len() > 22 {
			t.Fatalf("%s holds %d shards, over its share of 22", w.id, w.leases.Len())
		}
	}

	// c stalls mid-batch: it has read, and published, when its leases run out and
	// its heartbeat goes stale (the clock is the database's: moved in the rows).
	produce(60)
	if _, _, err := c.st.Tick(ctx, c.leases.Tokens()); err != nil {
		t.Fatal(err)
	}
	stale, err := c.st.Read(ctx, c.leases.Tokens(), c.next, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec(`UPDATE ob_token SET lease_until = now() - interval '1 second' WHERE token LIKE 'c/%';
UPDATE ob_workers SET heartbeat_at = now() - interval '1 hour' WHERE worker_id = 'c'`); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		a.rebalance()
		b.rebalance()
	}
	checkOwners(t, f, true, a, b)
	if a.leases.Len() != 32 || b.leases.Len() != 32 {
		t.Fatalf("after c stalled: a holds %d, b %d, want 32 each", a.leases.Len(), b.leases.Len())
	}
	for i := range stale.Events { // c publishes its stale batch...
		c.published = append(c.published, stale.Events[i])
	}
	holds := []Hold{}
	if len(stale.Events) > 0 {
		holds = append(holds, Hold{EventID: stale.Events[0].EventID, State: "RETRY"})
	}
	adv, err := c.st.Advance(ctx, Advance{Windows: stale.Windows, Holds: holds}) // ...and its advance is fenced
	if err != nil {
		t.Fatal(err)
	}
	if len(stale.Windows) == 0 || len(adv.Shards) != 0 || adv.Holds != 0 || adv.Batch != 0 {
		t.Fatalf("stale advance of %d windows moved %v, wrote %d hold rows, batch %d; want nothing",
			len(stale.Windows), adv.Shards, adv.Holds, adv.Batch)
	}

	// The two left drain everything, including c's stale batch (duplicates).
	produce(100)
	for range 3 {
		a.drain(40)
		b.drain(40)
	}
	f.checkDelivery(all())
	var holdRows int
	if err := f.db.QueryRow(`SELECT count(*) FROM ob_hold`).Scan(&holdRows); err != nil || holdRows != 0 {
		t.Fatalf("%d hold rows (%v), want none", holdRows, err)
	}

	// Shutdown: a releases everything, b takes it all.
	if err := a.st.ReleaseAll(ctx, &a.leases); err != nil {
		t.Fatal(err)
	}
	b.rebalance()
	checkOwners(t, f, true, a, b)
	if b.leases.Len() != 64 {
		t.Fatalf("after a left, b holds %d", b.leases.Len())
	}

	// The token table keeps a row per token that holds a shard: c's expired tokens,
	// which hold nothing since the takeover, went at b's sweep. (a's tokens last until
	// their lease runs out: a left cleanly a moment ago.)
	var stray int
	if err := f.db.QueryRow(`SELECT count(*) FROM ob_token k WHERE token LIKE 'c/%' OR
    NOT EXISTS (SELECT FROM ob_lease l WHERE l.owner = k.token) AND token NOT LIKE 'a/%'`).Scan(&stray); err != nil || stray != 0 {
		t.Fatalf("%d token rows of no shard (%v), want none", stray, err)
	}
}
