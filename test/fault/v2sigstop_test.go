package fault

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/kafkatest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// A v2 worker A publishes a batch of two topics: one topic refuses every write (its
// events are failures A must write to the hold table: RETRY, and their newer versions
// HELD), the other stores them. A's advance, the one statement that moves its shards'
// cursors and writes those hold rows, waits on a lock the test holds on the hold
// table, and A is SIGSTOPped there past its lease. Worker B takes every shard,
// publishes the batch again and writes the hold rows itself. The lock goes and A
// continues: its advance is fenced (no shard moves, no hold row of A's), it drops the
// shards and publishes nothing more under the lost leases (the duplicates are at most
// A's one batch). Once the topic takes writes again everything arrives, each
// aggregate in order.
func TestV2SIGSTOPPastLeaseWithHoldRowsIsFenced(t *testing.T) {
	const shards, batch = 16, 50
	dsn, db := v2Table(t, "16")
	ok, bad := newTopic(t, "v2stop-ok"), newTopic(t, "v2stop-bad")
	var evs []relaytest.Ev
	for i := range 40 { // per topic 10 aggregates x 2 versions
		tp := ok
		if i >= 20 {
			tp = bad
		}
		evs = append(evs, relaytest.Ev{ID: fmt.Sprintf("%s-%d", tp, i%20), AggID: fmt.Sprintf("%s-agg-%d", tp, i%10), Version: int64(i%20/10 + 1), Topic: tp})
	}
	relaytest.Insert(t, db, evs...)
	refusal := broker.RefuseProduce(kafkatest.ErrNotEnoughReplicas, bad)
	t.Cleanup(refusal.Stop)
	// EXCLUSIVE lets the workers read the hold table (ACCESS SHARE) but not write it.
	lock, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Rollback() })
	if _, err := lock.Exec(`LOCK TABLE public.outbox_event_hold IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	waiting := `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%outbox_event_hold%'`

	a := startWorker(t, "v2stop-A", dsn, "--lease=3s", fmt.Sprintf("--batch-size=%d", batch))
	relaytest.Eventually(t, 20*time.Second, "A's advance waiting for the hold table", func() bool { return mustCount(t, db, waiting) == 1 })
	if n := broker.Count(ok); n != 20 || refusal.Refused() == 0 {
		t.Fatalf("before A's advance: %d records of the working topic (want 20), %d refused requests", n, refusal.Refused())
	}
	if err := a.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	relaytest.Eventually(t, 5*time.Second, "worker A stopped", func() bool { return processState(a.Cmd.Process.Pid) == "T" })
	if o := owners(t, db); o["v2stop-A"] != shards {
		t.Fatalf("A holds %v shards, want all %d", o, shards)
	}
	relaytest.Eventually(t, 10*time.Second, "A's leases expired (database clock)", func() bool {
		return len(owners(t, db)) == 0
	})

	b := startWorker(t, "v2stop-B", dsn, "--lease=3s", fmt.Sprintf("--batch-size=%d", batch))
	relaytest.Eventually(t, 20*time.Second, "B holding every shard", func() bool { return owners(t, db)["v2stop-B"] == shards })
	relaytest.Eventually(t, 20*time.Second, "B published the batch again, its advance waiting too", func() bool {
		return broker.Count(ok) >= 40 && mustCount(t, db, waiting) == 2
	})
	if n := mustCount(t, db, `SELECT count(*) FROM public.outbox_event_hold`); n != 0 {
		t.Fatalf("%d hold rows while the table is locked", n)
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	holdStates := `SELECT count(*) FILTER (WHERE state = 'RETRY'), count(*) FILTER (WHERE state = 'HELD') FROM public.outbox_event_hold`
	relaytest.Eventually(t, 20*time.Second, "B wrote the refused topic's RETRY and HELD rows", func() bool {
		var retry, heldRows int
		if err := db.QueryRow(holdStates).Scan(&retry, &heldRows); err != nil {
			t.Fatal(err)
		}
		return retry == 10 && heldRows == 10
	})
	var holdsBefore string
	if err := db.QueryRow(`SELECT string_agg(event_id || ':' || state || ':' || attempts, ',' ORDER BY event_id) FROM public.outbox_event_hold`).Scan(&holdsBefore); err != nil {
		t.Fatal(err)
	}

	if err := a.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	relaytest.Eventually(t, 20*time.Second, "A's advance fenced", func() bool { return a.metric("outbox_mark_fenced_total") > 0 })
	fenced := int(a.metric("outbox_mark_fenced_total"))
	if !strings.Contains(a.Stderr(), "lease lost before the advance") {
		t.Fatalf("A's fenced advance was not logged:\n%s", a.Stderr())
	}
	if fenced > batch {
		t.Fatalf("A's fenced events: %d, more than its one batch of %d", fenced, batch)
	}
	// A's fenced advance wrote no hold row and changed none of B's (B's retries may
	// have moved attempts meanwhile: compare only while the refusal keeps them RETRY).
	var retry, heldRows int
	if err := db.QueryRow(holdStates).Scan(&retry, &heldRows); err != nil {
		t.Fatal(err)
	}
	if retry != 10 || heldRows != 10 {
		t.Fatalf("after A's fenced advance: %d RETRY and %d HELD hold rows, want 10 and 10 (before: %s)", retry, heldRows, holdsBefore)
	}
	byA := `SELECT count(*) FROM public.outbox_event_batch WHERE owner = 'v2stop-A'`
	if n := mustCount(t, db, `SELECT count(*) FROM public.outbox_event_batch WHERE owner = 'v2stop-B'`); n == 0 || mustCount(t, db, byA) != 0 {
		t.Fatalf("batch log rows: %d of B's, %d of A's; want B's only", n, mustCount(t, db, byA))
	}

	refusal.Stop()
	relaytest.Eventually(t, 30*time.Second, "the hold table empty once the topic takes writes", func() bool {
		return mustCount(t, db, `SELECT count(*) FROM public.outbox_event_hold`) == 0
	})
	dOK, dBad := verifyV2(t, db, ok, 30*time.Second), verifyV2(t, db, bad, 30*time.Second)
	t.Logf("A fenced with %d events of its batch; working topic: %d events, %d duplicates; refused topic: %d events, %d duplicates",
		fenced, dOK.events, dOK.duplicates, dBad.events, dBad.duplicates)
	// Only A's one publish of the working topic's 20 events can repeat what B
	// published; the refused topic stored nothing.
	if dOK.duplicates > 20 || dBad.duplicates != 0 {
		t.Errorf("duplicates %d + %d: more than A's one batch of the working topic (20): A published under a lost lease", dOK.duplicates, dBad.duplicates)
	}
	// After the refusal ends A may hold shards again under fresh tokens and send the
	// refused topic's hold rows of those shards (settle logs them under A's worker id):
	// that is A's to do. B published every event of the working topic and none was
	// committed after B's take-over, so one of them in a batch row of A's would be a
	// publish under A's lost leases.
	okByA := `SELECT count(*) FROM public.outbox_event_batch b CROSS JOIN LATERAL unnest(b.seqs) s(seq)
JOIN public.outbox_event o ON o.seq = s.seq WHERE b.owner = 'v2stop-A' AND o.destination = $1`
	if n := mustCount(t, db, okByA, ok); n != 0 {
		t.Errorf("%d working-topic events in batch log rows of A's after its leases were lost", n)
	}
	checkSurvived(t, 20, a, b)
	a.Stop(t)
	b.Stop(t)
}
