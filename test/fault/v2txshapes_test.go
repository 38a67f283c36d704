package fault

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardstore"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// quietAggregate is an aggregate id (type "order", prefix-<n>) whose shard of a
// 256-shard table none of busy's aggregates hashes to, and that shard. The expression
// is the contract's shard column (docs/contract-v2.md, "Tables").
func quietAggregate(t *testing.T, db *sql.DB, prefix string, busy []string) (string, int) {
	t.Helper()
	shardOf := func(agg string) int {
		var s int
		if err := db.QueryRow(`SELECT (hashtextextended('order/' || $1, 0) & 255)::int`, agg).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	used := map[int]bool{}
	for _, a := range busy {
		used[shardOf(a)] = true
	}
	for i := 0; ; i++ {
		agg := fmt.Sprintf("%s-%d", prefix, i)
		if s := shardOf(agg); !used[s] {
			used[s] = true
			return agg, s
		}
	}
}

// exec runs statements on an open transaction or connection, failing t.
func exec(t *testing.T, q relaytest.Execer, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := q.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// Producer transactions of unusual shapes on a v2 table, beside a steady producer and
// under two worker processes: a transaction with a lower xid that commits a higher
// version of an aggregate after its lower version was published; a long transaction
// and a prepared one, each open across more than 2 x IdleTicks ticks on a shard no
// other event uses, so the idle close moves that shard's window past them while they
// run; a transaction writing only inside savepoints, one of them rolled back. Nothing
// of an open transaction is published, each arrives after its commit, the rolled-back
// row never does, and every aggregate is in order.
func TestV2UnusualProducerTransactions(t *testing.T) {
	dsn, db := v2Table(t, "256")
	tp, sh := newTopic(t, "v2shapes"), newTopic(t, "v2shapes-tx")
	ws := []*worker{startWorker(t, "v2shapes-1", dsn, "--lease=3s"), startWorker(t, "v2shapes-2", dsn, "--lease=3s")}
	for _, w := range ws {
		w.waitReady(t)
	}
	prod := startProducer(t, db, tp, 12)
	busy := make([]string, 12)
	for i := range busy {
		busy[i] = fmt.Sprintf("%s-a%d", tp, i)
	}
	longAgg, longShard := quietAggregate(t, db, sh+"-long", busy)
	prepAgg, prepShard := quietAggregate(t, db, sh+"-prep", append(busy, longAgg))
	ev := func(id, agg string, v int64) relaytest.Ev {
		return relaytest.Ev{ID: sh + "-" + id, AggID: agg, Version: v, Topic: sh}
	}
	relaytest.Eventually(t, 30*time.Second, "100 events relayed", func() bool { return broker.Count(tp) >= 100 })

	// Lower xid, higher version, committed after the lower version was published.
	low, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = low.Rollback() })
	exec(t, low, `SELECT pg_current_xact_id()`)
	relaytest.Insert(t, db, ev("low-v1", sh+"-low", 1))
	relaytest.Eventually(t, 10*time.Second, "low-v1 published", func() bool { return broker.Count(sh) == 1 })
	relaytest.Insert(t, low, ev("low-v2", sh+"-low", 2))

	long, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = long.Rollback() })
	relaytest.Insert(t, long, ev("long-v1", longAgg, 1))

	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gid := "fault-" + sh
	exec(t, conn, `BEGIN`)
	relaytest.Insert(t, conn, ev("prep-v1", prepAgg, 1))
	exec(t, conn, fmt.Sprintf(`PREPARE TRANSACTION '%s'`, gid))
	prepared := true
	t.Cleanup(func() {
		if prepared {
			_, _ = db.Exec(fmt.Sprintf(`ROLLBACK PREPARED '%s'`, gid))
		}
	})

	sub, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Rollback() })
	exec(t, sub, `SAVEPOINT a`)
	relaytest.Insert(t, sub, ev("sub-v1", sh+"-sub", 1))
	exec(t, sub, `RELEASE SAVEPOINT a`, `SAVEPOINT b`)
	relaytest.Insert(t, sub, ev("sub-rolled-back", sh+"-sub", 2))
	exec(t, sub, `ROLLBACK TO SAVEPOINT b`, `SAVEPOINT c`)
	relaytest.Insert(t, sub, ev("sub-v2", sh+"-sub", 2))
	exec(t, sub, `RELEASE SAVEPOINT c`)
	if err := sub.Commit(); err != nil {
		t.Fatal(err)
	}
	relaytest.Eventually(t, 10*time.Second, "the savepoint transaction's two rows published", func() bool { return broker.Count(sh) == 3 })

	// Let the stream tick on past the open transactions, far enough for the idle close
	// to move their quiet shards' windows over them.
	tick := func() int { return mustCount(t, db, `SELECT max(tick) FROM public.outbox_event_tick`) }
	from := tick()
	relaytest.Eventually(t, 30*time.Second, fmt.Sprintf("%d ticks while the transactions are open", 2*shardstore.IdleTicks), func() bool {
		if n := broker.Count(sh); n != 3 {
			t.Fatalf("%d records of the transactions' topic while three are open, want 3", n)
		}
		return tick() >= from+2*shardstore.IdleTicks
	})
	closed := fmt.Sprintf(`SELECT count(*) FROM public.outbox_event_shard WHERE shard IN (%d, %d) AND lo_tick > %d`, longShard, prepShard, from)
	relaytest.Eventually(t, 10*time.Second, "the quiet shards' windows moved past the open transactions", func() bool {
		return mustCount(t, db, closed) == 2
	})
	if err := low.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := long.Commit(); err != nil {
		t.Fatal(err)
	}
	exec(t, db, fmt.Sprintf(`COMMIT PREPARED '%s'`, gid))
	prepared = false
	relaytest.Eventually(t, 10*time.Second, "the late commits published", func() bool { return broker.Count(sh) >= 6 })
	prod.Stop(t)

	var lower bool
	if err := db.QueryRow(`SELECT a.txid < b.txid FROM public.outbox_event a, public.outbox_event b
WHERE a.event_id = $1 AND b.event_id = $2`, sh+"-low-v2", sh+"-low-v1").Scan(&lower); err != nil || !lower {
		t.Fatalf("scenario: low-v2's transaction has the lower xid: %v, %v", lower, err)
	}
	d := verifyV2(t, db, sh, 10*time.Second)
	if d.events != 6 || d.duplicates != 0 {
		t.Fatalf("the transactions' topic: %d events, %d duplicates; want 6 and 0", d.events, d.duplicates)
	}
	s := verifyV2(t, db, tp, 30*time.Second)
	t.Logf("%d ticks from the transactions' start to the end; steady stream: %d events, %d duplicates", tick()-from, s.events, s.duplicates)
	checkSurvived(t, 3, ws...)
	for _, w := range ws {
		w.Stop(t)
	}
}
