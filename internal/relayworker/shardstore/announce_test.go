package shardstore

import (
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// A lease round that releases shards, and ReleaseAll, announce it on the table's
// channel (schema.LeasesReleased), so the other workers take the shards at once
// instead of at their next round; a round that releases nothing announces nothing.
func TestReleaseAnnouncesItselfOnTheTablesChannel(t *testing.T) {
	f := newFixture(t, 8)
	l := pq.NewListener(f.dsn, 100*time.Millisecond, time.Second, nil)
	t.Cleanup(func() { _ = l.Close() })
	if err := l.Listen(schema.Channel(f.tb)); err != nil {
		t.Fatal(err)
	}
	next := func(what string) string {
		t.Helper()
		select {
		case n := <-l.Notify:
			if n == nil {
				t.Fatalf("%s: the listener reconnected", what)
			}
			return n.Extra
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no notification within 10 s", what)
		}
		return ""
	}
	a, b := f.worker("a"), f.worker("b")
	a.rebalance() // takes all 8, releases nothing
	if p := b.rebalance(); !p.Soon || b.leases.Len() != 0 {
		t.Fatalf("b joining: %+v, holds %d; want Soon and nothing", p, b.leases.Len())
	}
	// The producer's kind of notification, sent after the rounds above: it must be the
	// first one the listener gets (they announced nothing).
	if _, err := f.db.Exec(`SELECT pg_notify($1, '')`, schema.Channel(f.tb)); err != nil {
		t.Fatal(err)
	}
	if got := next("rounds that released nothing"); got != "" {
		t.Fatalf("first notification %q, want the producer's empty one", got)
	}
	a.rebalance() // over its share of 4: releases 4
	if a.leases.Len() != 4 {
		t.Fatalf("a holds %d after its round, want 4", a.leases.Len())
	}
	if got := next("a's releasing round"); got != schema.LeasesReleased {
		t.Fatalf("after a release: %q, want %q", got, schema.LeasesReleased)
	}
	if err := a.st.ReleaseAll(ctx, &a.leases); err != nil {
		t.Fatal(err)
	}
	if got := next("ReleaseAll"); got != schema.LeasesReleased {
		t.Fatalf("after ReleaseAll: %q, want %q", got, schema.LeasesReleased)
	}
}
