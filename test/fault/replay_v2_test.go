package fault

import (
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relayproc"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// DEAD events of a v2 table replayed as the DeadLetterReplay Job replays them: a
// `relayworker replay` process hands the selected DEAD hold rows back, a `relayworker
// relay` process publishes them from the hold table, the replay exits 0 once they
// were sent, and the DEAD row its selector does not match stays.
func TestV2ReplayProcessPublishesDeadHoldRows(t *testing.T) {
	dsn, db := v2Table(t, "16")
	tp := "v2replay-" + time.Now().Format("150405.000000") // created only after they went DEAD
	for i, typ := range []string{"OrderPaid", "OrderPaid", "OrderPaid", "OrderPaid", "OrderShipped"} {
		if _, err := db.Exec(`INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
			destination, message_key, payload, created_at) VALUES ($1, 'order', $1, 1, $2, $3, $1, '{}', now() - interval '1 hour')`,
			"dead-"+string(rune('a'+i)), typ, tp); err != nil {
			t.Fatal(err)
		}
	}
	w := startWorker(t, "v2replay-1", dsn, "--unknown-topic-grace=1m")
	w.waitReady(t)
	relaytest.Eventually(t, 30*time.Second, "five DEAD hold rows", func() bool {
		return count(db, `SELECT count(*) FROM outbox_event_hold WHERE state = 'DEAD' AND last_error_code = 'TOPIC_NOT_FOUND'`) == 5
	})
	if err := broker.CreateTopic(tp, 3); err != nil {
		t.Fatal(err)
	}
	// A fresh event: once on Kafka, the worker's producer knows the topic.
	if _, err := db.Exec(`INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
		destination, message_key, payload) VALUES ('probe', 'probe', 'probe', 1, 'Probe', $1, 'probe', '{}')`, tp); err != nil {
		t.Fatal(err)
	}
	relaytest.Eventually(t, 30*time.Second, "the probe on the new topic", func() bool { return broker.Count(tp) == 1 })

	code, out := relayproc.Run(t, bin, []string{"OUTBOX_DSN=" + dsn}, "replay", "--replay-id=shop/fix-topic/u1",
		"--reason=INC-9: topic created", "--requested-by=oncall", "--event-type=OrderPaid", "--canary-size=2", "--rate=100",
		"--settle-timeout=1m")
	if code != 0 {
		t.Fatalf("replay: exit %d: %s", code, out)
	}
	if n := broker.Count(tp); n != 5 {
		t.Fatalf("%d records on the topic, want the probe and the 4 replayed events", n)
	}
	if n := mustCount(t, db, `SELECT count(*) FROM outbox_event_hold WHERE event_id = 'dead-e' AND state = 'DEAD'`) +
		mustCount(t, db, `SELECT count(*) FROM outbox_event_hold`); n != 2 {
		t.Fatalf("the hold table should keep only the unselected DEAD row")
	}
	if n := mustCount(t, db, `SELECT count(*) FROM outbox_event_replay_audit
		WHERE replay_id = 'shop/fix-topic/u1' AND phase = 'Succeeded' AND matched = 4 AND replayed = 4 AND succeeded = 4 AND dead_again = 0`); n != 1 {
		t.Fatalf("no Succeeded audit row with 4 matched, replayed and succeeded")
	}
	if n := mustCount(t, db, `SELECT count(*) FROM outbox_event_status WHERE status = 'SENT' AND event_id LIKE 'dead-%'`); n != 4 {
		t.Fatalf("%d replayed events SENT in the status view, want 4", n)
	}
}
