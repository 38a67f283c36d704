package fault

import (
	"context"
	"database/sql"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// cdcWorkers starts n workers in logical-replication mode on one slot and waits until
// one of them reads it.
func cdcWorkers(t *testing.T, prefix, dsn, slot string, n int, extra ...string) []*worker {
	t.Helper()
	var ws []*worker
	for i := 1; i <= n; i++ {
		args := append([]string{"--source-mode=logical-replication", "--slot=" + slot, "--cdc-handover-after=2s",
			"--cdc-heartbeat=1s", "--lease=3s", "--batch-size=100"}, extra...)
		ws = append(ws, startWorker(t, fmt.Sprintf("%s-%d", prefix, i), dsn, args...))
	}
	for _, w := range ws {
		w.waitReady(t)
	}
	relaytest.Eventually(t, 20*time.Second, "one worker reading the slot", func() bool { return reader(ws) != nil })
	return ws
}

// reader is the worker whose outbox_cdc_reader gauge is 1, or nil.
func reader(ws []*worker) *worker {
	for _, w := range ws {
		if w.metric("outbox_cdc_reader") == 1 {
			return w
		}
	}
	return nil
}

func slotLSN(t *testing.T, db *sql.DB, slot string) (confirmed string, active bool) {
	t.Helper()
	if err := db.QueryRow(`SELECT coalesce(confirmed_flush_lsn::text, ''), active FROM pg_replication_slots WHERE slot_name = $1`, slot).
		Scan(&confirmed, &active); err != nil {
		t.Fatalf("slot %s: %v", slot, err)
	}
	return confirmed, active
}

func dropSlot(t *testing.T, db *sql.DB, slot string) {
	t.Cleanup(func() {
		_, _ = db.Exec(`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, slot)
	})
}

// Two workers share a slot: one reads it, the other stands by. A stream of events over
// few aggregates arrives complete and in per-aggregate order; nearly all of it came
// through the slot (claimed by id), and the slot's confirmed position moved on.
func TestCDCRelaysFromTheSlot(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	const slot = "fault_cdc_basic"
	dropSlot(t, db, slot)
	tp := newTopic(t, "cdc")
	ws := cdcWorkers(t, "cdc", dsn, slot, 2)
	before, _ := slotLSN(t, db, slot)
	prod := startProducer(t, db, tp, 8)
	relaytest.Eventually(t, 30*time.Second, "2,000 events committed", func() bool { return prod.committed.Load() >= 2000 })
	prod.Stop(t)
	relaytest.Eventually(t, 30*time.Second, "every row SENT", func() bool {
		return mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE status <> 'SENT'`) == 0
	})
	checkSurvived(t, 0, ws...)
	d := verifyDelivery(t, db, tp)
	r := reader(ws)
	if r == nil {
		t.Fatal("no worker reads the slot")
	}
	claimed := r.metric("outbox_cdc_claimed_total")
	t.Logf("events %d, records %d, duplicates %d; %s claimed %.0f from the slot", d.events, d.records, d.duplicates, r.name, claimed)
	if claimed < 0.9*float64(d.events) {
		t.Errorf("only %.0f of %d events were claimed from the slot: polling did the work", claimed, d.events)
	}
	relaytest.Eventually(t, 10*time.Second, "the slot confirmed past the stream", func() bool {
		after, active := slotLSN(t, db, slot)
		return active && after != before && lsnAfter(t, db, after, before)
	})
	for _, w := range ws {
		w.Stop(t)
	}
	if _, active := slotLSN(t, db, slot); active {
		t.Error("the slot is still active after both workers stopped")
	}
}

// An idle pipeline's slot keeps moving: with no events, the confirmed position passes
// the WAL written before, so the slot holds nothing back (docs/cdc.md). On PostgreSQL
// 14+ the reader sees its heartbeat's logical message; 13 streams no messages through
// pgoutput, and the reader moves on the keepalive and the other transactions instead.
func TestCDCIdleSlotKeepsMoving(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	const slot = "fault_cdc_idle"
	dropSlot(t, db, slot)
	ws := cdcWorkers(t, "cdcidle", dsn, slot, 1)
	var mark string
	if err := db.QueryRow(`SELECT pg_current_wal_lsn()::text`).Scan(&mark); err != nil {
		t.Fatal(err)
	}
	relaytest.Eventually(t, 15*time.Second, "the idle slot confirmed past "+mark, func() bool {
		after, _ := slotLSN(t, db, slot)
		return after != "" && !lsnAfter(t, db, mark, after)
	})
	ws[0].Stop(t)
}

func lsnAfter(t *testing.T, db *sql.DB, a, b string) bool {
	var later bool
	if err := db.QueryRow(`SELECT $1::pg_lsn > $2::pg_lsn`, a, b).Scan(&later); err != nil {
		t.Fatal(err)
	}
	return later
}

// The reader is SIGKILLed mid-stream: the standby takes the slot within seconds and
// resumes from the confirmed position; rows the dead reader had claimed come back
// after their lease. Nothing is lost, order holds, duplicates are counted.
func TestCDCReaderKill9MidStream(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	const slot = "fault_cdc_kill"
	dropSlot(t, db, slot)
	tp := newTopic(t, "cdckill")
	ws := cdcWorkers(t, "cdckill", dsn, slot, 2)
	prod := startProducer(t, db, tp, 12)
	relaytest.Eventually(t, 30*time.Second, "500 events committed", func() bool { return prod.committed.Load() >= 500 })
	relaytest.Eventually(t, 20*time.Second, "a worker reading the slot", func() bool { return reader(ws) != nil })
	victim := reader(ws)
	if err := victim.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.Done()
	killed := time.Now()
	var standby *worker
	for _, w := range ws {
		if w != victim {
			standby = w
		}
	}
	relaytest.Eventually(t, 20*time.Second, "the standby reading the slot", func() bool { return standby.metric("outbox_cdc_reader") == 1 })
	takeover := time.Since(killed)
	relaytest.Eventually(t, 30*time.Second, "500 more events committed", func() bool { return prod.committed.Load() >= 1000 })
	prod.Stop(t)
	relaytest.Eventually(t, 60*time.Second, "every row SENT", func() bool {
		return mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE status <> 'SENT'`) == 0
	})
	d := verifyDelivery(t, db, tp)
	t.Logf("events %d, records %d, duplicates %d; the standby read the slot %s after the kill", d.events, d.records, d.duplicates, takeover.Round(time.Millisecond))
	if takeover > 10*time.Second {
		t.Errorf("take-over took %s", takeover)
	}
	standby.Stop(t)
}

// PostgreSQL is SIGKILLed and restarted under a logical-replication stream: the
// reader reconnects to its slot (which survives the crash) and every committed event
// arrives.
func TestCDCPostgresCrash(t *testing.T) {
	srv, err := pgtest.Start(pgtest.Options{Settings: pgtest.LogicalReplication})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	dsn, db := srv.OpenDatabase(t)
	if err := relaytest.MigrateDefault(db); err != nil {
		t.Fatal(err)
	}
	tp := newTopic(t, "cdcpg")
	ws := cdcWorkers(t, "cdcpg", dsn, "fault_cdc_pgcrash", 2)
	prod := startProducer(t, db, tp, 12)
	relaytest.Eventually(t, 30*time.Second, "400 events committed", func() bool { return prod.committed.Load() >= 400 })
	if err := srv.Kill9(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	at := prod.committed.Load()
	relaytest.Eventually(t, 30*time.Second, "400 more events after the restart", func() bool { return prod.committed.Load() >= at+400 })
	relaytest.Eventually(t, 30*time.Second, "a worker reading the slot again", func() bool { return reader(ws) != nil })
	prod.Stop(t)
	relaytest.Eventually(t, 60*time.Second, "every row SENT", func() bool {
		// count, not mustCount: the crash broke the connections db's pool held, and a
		// query that meets one of them fails once (-1: ask again) until the pool has
		// replaced them.
		return count(db, `SELECT count(*) FROM public.outbox_event WHERE status <> 'SENT'`) == 0
	})
	checkSurvived(t, 40, ws...)
	d := verifyDelivery(t, db, tp)
	t.Logf("events %d, records %d, duplicates %d; producer retried %d transactions", d.events, d.records, d.duplicates, prod.retried.Load())
	for _, w := range ws {
		w.Stop(t)
	}
}

// The broker goes off the network for eight seconds under a logical-replication
// stream: nothing turns DEAD, nothing is lost, and the slot waits (it is not
// confirmed past unpublished rows).
func TestCDCBrokerOutage(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	const slot = "fault_cdc_broker"
	dropSlot(t, db, slot)
	tp := newTopic(t, "cdcbroker")
	ws := cdcWorkers(t, "cdcbroker", dsn, slot, 2)
	prod := startProducer(t, db, tp, 12)
	relaytest.Eventually(t, 30*time.Second, "300 events committed", func() bool { return prod.committed.Load() >= 300 })
	if err := broker.Unplug(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(8 * time.Second)
	if err := broker.Replug(); err != nil {
		t.Fatal(err)
	}
	at := prod.committed.Load()
	relaytest.Eventually(t, 30*time.Second, "300 more events after the outage", func() bool { return prod.committed.Load() >= at+300 })
	prod.Stop(t)
	relaytest.Eventually(t, 90*time.Second, "every row SENT", func() bool {
		return mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE status <> 'SENT'`) == 0
	})
	if n := mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE status = 'DEAD'`); n != 0 {
		t.Fatalf("%d events DEAD after a broker outage", n)
	}
	d := verifyDelivery(t, db, tp)
	t.Logf("events %d, records %d, duplicates %d", d.events, d.records, d.duplicates)
	for _, w := range ws {
		w.Stop(t)
	}
}

// A column is added to the outbox table mid-stream (PostgreSQL sends a new relation
// message), then a long transaction holds its inserts open while 300 other events
// commit and flow past it (the slot cannot release WAL behind it meanwhile):
// everything arrives, the long transaction's events once it commits.
func TestCDCSchemaChangeAndLongTransaction(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	const slot = "fault_cdc_schema"
	dropSlot(t, db, slot)
	tp := newTopic(t, "cdcschema")
	ws := cdcWorkers(t, "cdcschema", dsn, slot, 1)
	prod := startProducer(t, db, tp, 12)
	relaytest.Eventually(t, 30*time.Second, "200 events committed", func() bool { return prod.committed.Load() >= 200 })

	// The schema change first: ALTER TABLE would wait for the long transaction's lock.
	if _, err := db.Exec(`ALTER TABLE public.outbox_event ADD COLUMN IF NOT EXISTS tenant text NULL`); err != nil {
		t.Fatal(err)
	}
	mid := prod.committed.Load()
	relaytest.Eventually(t, 30*time.Second, "200 events after the schema change", func() bool { return prod.committed.Load() >= mid+200 })

	long, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := long.Exec(`INSERT INTO public.outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload)
			VALUES ($1, 'order', $1, 1, 'order.created', $2, $1, '{}')`, fmt.Sprintf("%s-long-%d", tp, i), tp); err != nil {
			t.Fatal(err)
		}
	}
	at := prod.committed.Load()
	relaytest.Eventually(t, 30*time.Second, "300 events past the long transaction", func() bool {
		return prod.committed.Load() >= at+300 &&
			mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE status = 'SENT' AND event_id NOT LIKE '%-long-%'`) >= int(at)+300
	})
	if n := mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE event_id LIKE '%-long-%'`); n != 0 {
		t.Fatalf("the open transaction's rows are visible: %d", n)
	}
	if err := long.Commit(); err != nil {
		t.Fatal(err)
	}
	prod.Stop(t)
	relaytest.Eventually(t, 30*time.Second, "every row SENT", func() bool {
		return mustCount(t, db, `SELECT count(*) FROM public.outbox_event WHERE status <> 'SENT'`) == 0
	})
	checkSurvived(t, 0, ws...)
	d := verifyDelivery(t, db, tp)
	t.Logf("events %d (20 in the long transaction), records %d, duplicates %d", d.events, d.records, d.duplicates)
	ws[0].Stop(t)
}
