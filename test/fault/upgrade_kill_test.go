package fault

import (
	"database/sql"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relayproc"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// `relayworker migrate --contract v2` killed with SIGKILL while it copies a v1
// backlog into the hold table, with a producer committing throughout: the table is v2
// from the upgrade's first transaction on (the producer's INSERTs go on against it),
// the next migrate resumes the copy after the killed one's last committed chunk, and
// once two v2 workers run every committed event reaches Kafka (lost = 0), each
// aggregate's versions first in order, and each v1 DEAD row is one DEAD hold row,
// which a replay process then publishes.
func TestV1ToV2UpgradeKilledMidCopy(t *testing.T) {
	const backlog, aggs, dead = 5000, 200, 7
	dsn, db, tp := v1TableWithDead(t, "upgrade-kill", dead)
	env := []string{"OUTBOX_DSN=" + dsn}
	// The v1 backlog: PENDING rows, each aggregate's versions in insert order (aggregates
	// of their own: the producer's are <topic>-a<n>).
	if _, err := db.Exec(`INSERT INTO public.outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version,
    event_type, destination, message_key, payload)
SELECT $1 || '-b' || g, 'order', $1 || '-backlog' || (g % $2), g, 'order.changed', $1, $1 || '-backlog' || (g % $2), '{}'
FROM generate_series(1, $3::int) g`, tp, aggs, backlog); err != nil {
		t.Fatal(err)
	}
	prod := startProducer(t, db, tp, 12)
	relaytest.Eventually(t, 30*time.Second, "the producer committing", func() bool { return prod.committed.Load() >= 20 })

	// Ten v1 rows per chunk: the copy takes some 500 transactions; kill it in the
	// middle, after some of them committed.
	m := relayproc.Spawn(t, bin, env, "migrate", "--contract=v2", "--shards=16", "--upgrade-chunk-rows=10")
	var atKill int
	relaytest.Eventually(t, 60*time.Second, "the copy under way", func() bool {
		n, state, err := upgradeProgress(db)
		atKill = n
		return err == nil && state == "copying" && n >= backlog/10
	})
	if err := m.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-m.Done()
	n, state, err := upgradeProgress(db)
	if err != nil || state != "copying" {
		t.Fatalf("after the kill: %d copied, state %q, %v; want the copy in progress (make the backlog larger if it finished)", n, state, err)
	}
	t.Logf("migrate killed with %d of %d v1 rows with work copied (%d when the kill was sent)", n, backlog+dead, atKill)
	relaytest.Eventually(t, 30*time.Second, "the producer committing to the v2 table meanwhile", func() bool {
		return mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE destination = $1`, tp) >= 20
	})

	if code, out := relayproc.Run(t, bin, env, "migrate", "--contract=v2", "--shards=16", "--upgrade-chunk-rows=500"); code != 0 {
		t.Fatalf("migrate --contract v2 after the kill: exit %d: %s", code, out)
	}
	if n, state, err := upgradeProgress(db); err != nil || state != "done" || n < atKill {
		t.Fatalf("after the resumed migrate: %d copied, state %q, %v; want done", n, state, err)
	}
	a := startWorker(t, "upgrade-kill-a", dsn, "--batch-size=200", "--lease=3s")
	b := startWorker(t, "upgrade-kill-b", dsn, "--batch-size=200", "--lease=3s")
	a.waitReady(t)
	b.waitReady(t)
	before := prod.committed.Load()
	relaytest.Eventually(t, 30*time.Second, "200 more events committed with the v2 workers", func() bool {
		return prod.committed.Load() >= before+200
	})
	prod.Stop(t)

	if n := checkUpgradeDelivered(t, db, tp, dead, 120*time.Second); n < backlog+200 {
		t.Fatalf("%d committed events, want at least the %d of the backlog and 200 more", n, backlog)
	}
	// The v1 DEAD rows are replayable from the hold table, as a DeadLetterReplay Job
	// replays them: a `relayworker replay` process, published by the running workers.
	onKafka := broker.Count(tp)
	code, out := relayproc.Run(t, bin, env, "replay", "--replay-id=shop/after-upgrade/u1",
		"--reason=INC-10: v1 dead rows after the upgrade", "--requested-by=oncall", "--event-type=order.changed",
		"--canary-size=2", "--rate=100", "--settle-timeout=1m")
	if code != 0 {
		t.Fatalf("replay of the v1 DEAD rows: exit %d: %s", code, out)
	}
	if n := broker.Count(tp) - onKafka; n != dead {
		t.Fatalf("%d records published by the replay, want the %d v1 DEAD rows", n, dead)
	}
	if n := mustCount(t, db, `SELECT count(*) FROM public.outbox_event_replay_audit WHERE replay_id = 'shop/after-upgrade/u1'
AND phase = 'Succeeded' AND matched = $1 AND succeeded = $1`, dead); n != 1 {
		t.Fatalf("no Succeeded audit row with %d matched and succeeded", dead)
	}
	checkSurvived(t, 3, a, b)
}

// upgradeProgress reads the upgrade's progress row (state "" before it exists).
func upgradeProgress(db *sql.DB) (copied int, state string, err error) {
	err = db.QueryRow(`SELECT copied, state FROM public.outbox_event_upgrade`).Scan(&copied, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", nil
	}
	return copied, state, err
}
