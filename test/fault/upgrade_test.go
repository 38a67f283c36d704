package fault

import (
	"database/sql"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relayproc"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// A v1 table is upgraded to contract v2 with `relayworker migrate --contract v2` while
// a producer keeps committing and two v1 workers relay; two v2 workers start after the
// migrate. The v1 workers are SIGSTOPped before the migrate, so it carries a backlog
// of PENDING and SENDING rows over, and SIGCONTed after it: they stop on their own
// with one line (a rolling deploy replaces them). Every
// committed event reaches Kafka (lost = 0), each aggregate's versions first arrive in
// order (duplicates allowed and counted), and the v1 DEAD rows are DEAD hold rows.
func TestV1ToV2UpgradeUnderLoad(t *testing.T) {
	const dead = 7
	dsn, db, tp := v1TableWithDead(t, "upgrade", dead)
	v1a := startWorker(t, "upgrade-v1a", dsn, "--batch-size=50", "--lease=4s")
	v1b := startWorker(t, "upgrade-v1b", dsn, "--batch-size=50", "--lease=4s")
	v1a.waitReady(t)
	v1b.waitReady(t)
	prod := startProducer(t, db, tp, 12)
	relaytest.Eventually(t, 30*time.Second, "300 events relayed by the v1 workers", func() bool { return broker.Count(tp) >= 300 })

	// A backlog for the upgrade to carry over: the v1 workers stopped (SIGSTOP, each
	// holding what it had claimed as SENDING) while the producer goes on.
	for _, w := range []*worker{v1a, v1b} {
		if err := w.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	stopped := prod.committed.Load()
	relaytest.Eventually(t, 30*time.Second, "a backlog of 200 events", func() bool { return prod.committed.Load() >= stopped+200 })
	before := prod.committed.Load()
	began := time.Now()
	if code, out := relayproc.Run(t, bin, []string{"OUTBOX_DSN=" + dsn}, "migrate", "--contract=v2", "--shards=16"); code != 0 {
		t.Fatalf("migrate --contract v2 on the v1 table: exit %d: %s", code, out)
	}
	took := time.Since(began)
	var copied, deadCopied int
	if err := db.QueryRow(`SELECT copied, dead FROM public.outbox_event_upgrade WHERE state = 'done'`).Scan(&copied, &deadCopied); err != nil {
		t.Fatalf("upgrade state: %v", err)
	}
	// The v1 workers go on: whatever they publish is a duplicate, their marks fail.
	for _, w := range []*worker{v1a, v1b} {
		if err := w.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("migrate --contract v2 took %s: %d v1 rows with work copied to the hold table (%d DEAD); %d events committed before it",
		took.Round(time.Millisecond), copied, deadCopied, before)

	v2a := startWorker(t, "upgrade-v2a", dsn, "--batch-size=50", "--lease=3s")
	v2b := startWorker(t, "upgrade-v2b", dsn, "--batch-size=50", "--lease=3s")
	v2a.waitReady(t)
	v2b.waitReady(t)
	if !strings.Contains(v2a.Stderr(), `"contract":"v2"`) {
		t.Fatalf("the new worker did not start the v2 relay: %s", v2a.Stderr())
	}
	relaytest.Eventually(t, 30*time.Second, "300 events committed after the upgrade", func() bool {
		return prod.committed.Load() >= before+300
	})
	// The v1 workers stop on their own at their next claim, with one line saying why.
	relaytest.Eventually(t, 30*time.Second, "the v1 workers stopped", func() bool { return v1a.Exited() && v1b.Exited() })
	for _, w := range []*worker{v1a, v1b} {
		if last := lastLines(w.Stderr(), 1); !strings.Contains(last, "relayworker: outbox table public.outbox_event was upgraded to table contract v2 while this worker ran the v1 relay") {
			t.Fatalf("%s's last line: %s", w.name, last)
		}
	}
	t.Logf("a v1 worker's log after the upgrade: %s", lastLines(v1a.Stderr(), 3))
	relaytest.Eventually(t, 30*time.Second, "300 more events committed with only v2 workers", func() bool {
		return prod.committed.Load() >= before+600
	})
	prod.Stop(t)

	checkUpgradeDelivered(t, db, tp, dead, 60*time.Second)
	checkSurvived(t, 3, v2a, v2b)
}

// v1TableWithDead is a v1 outbox table in a database of its own, a fresh topic named
// after prefix, and dead DEAD rows for it (attempts 3, MESSAGE_TOO_LARGE), which an
// upgrade must keep as DEAD hold rows.
func v1TableWithDead(t *testing.T, prefix string, dead int) (dsn string, db *sql.DB, tp string) {
	t.Helper()
	dsn, db = relaytest.PG.OpenDatabase(t)
	if code, out := relayproc.Run(t, bin, []string{"OUTBOX_DSN=" + dsn}, "migrate", "--contract=v1"); code != 0 {
		t.Fatalf("migrate (v1): exit %d: %s", code, out)
	}
	tp = newTopic(t, prefix)
	for i := range dead {
		if _, err := db.Exec(`INSERT INTO public.outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
    destination, message_key, payload, status, retry_count, last_error_code, last_error_message)
VALUES ($1, 'order', $1, 1, 'order.changed', $2, $1, '{}', 'DEAD', 3, 'MESSAGE_TOO_LARGE', 'too large')`,
			fmt.Sprintf("%s-dead%d", tp, i), tp); err != nil {
			t.Fatal(err)
		}
	}
	return dsn, db, tp
}

// checkUpgradeDelivered waits until every event committed for topic tp across an
// upgrade (the v2 table's rows and the v1 rows moved aside, but the DEAD ones) is on
// Kafka, checks the records (each aggregate's versions first in order, duplicates
// allowed), that no hold row stays open, and that the dead v1 DEAD rows are DEAD hold
// rows with their attempts and error. It returns how many events were committed.
func checkUpgradeDelivered(t *testing.T, db *sql.DB, tp string, dead int, within time.Duration) int {
	t.Helper()
	committed := map[string]bool{}
	rows, err := db.Query(`SELECT event_id FROM public.outbox_event WHERE destination = $1
UNION ALL SELECT event_id FROM public.outbox_event_v1 WHERE destination = $1 AND status <> 'DEAD'`, tp)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		committed[id] = true
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	// Not a record count: late publishes of stopped v1 workers are duplicates that
	// reach it while versions HELD behind their rows (due at the lease end) still wait.
	relaytest.Eventually(t, within, "every committed event on Kafka", func() bool {
		return missing(t, tp, committed) == 0
	})
	d := verifyRecords(t, committed, tp)
	t.Logf("%d events, %d records, %d duplicates", d.events, d.records, d.duplicates)
	relaytest.Eventually(t, 30*time.Second, "no open hold row", func() bool {
		return mustCount(t, db, `SELECT count(*) FROM public.outbox_event_hold WHERE state <> 'DEAD'`) == 0
	})
	if n := mustCount(t, db, `SELECT count(*) FROM public.outbox_event_hold WHERE state = 'DEAD' AND attempts = 3
AND last_error_code = 'MESSAGE_TOO_LARGE' AND destination = $1`, tp); n != dead {
		t.Fatalf("%d of the %d v1 DEAD rows are DEAD hold rows with their attempts and error", n, dead)
	}
	return len(committed)
}

// lastLines is s's last n lines.
func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// missing is how many of the committed event ids topic tp does not hold yet.
func missing(t *testing.T, tp string, committed map[string]bool) int {
	t.Helper()
	recs, err := broker.ReadAllWithin(10*time.Second, tp, int(broker.Count(tp)))
	if err != nil {
		t.Fatalf("read %s: %v", tp, err)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		for _, h := range r.Headers {
			if h.Key == "event_id" {
				seen[string(h.Value)] = true
			}
		}
	}
	n := 0
	for id := range committed {
		if !seen[id] {
			n++
		}
	}
	return n
}
