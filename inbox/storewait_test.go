package inbox_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/inbox"
	"github.com/outbox-operator/outbox-operator/internal/testenv/logtest"
)

// TestStoreFaultThatNeverPassesIsBounded: another session holds the lock on an
// aggregate's version row and never lets go, so inbox's own claim statement fails
// with a lock timeout (55P03) on every try. That is waited out uncounted for
// MaxStoreWait only (and counted in inbox_store_fault_total); then it counts, the
// message is parked after MaxAttempts, and the messages behind it flow.
func TestStoreFaultThatNeverPassesIsBounded(t *testing.T) {
	db, s := setup(t)
	if _, err := db.Exec(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET lock_timeout = ''100ms''', current_database()); END $$`); err != nil {
		t.Fatal(err)
	}
	db.SetMaxIdleConns(0) // new connections get the lock_timeout
	db.SetMaxIdleConns(2)
	locker, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Rollback() //nolint:errcheck // the lock is held until the test ends
	if _, err := locker.Exec(`INSERT INTO message_consume_version (consumer_group, aggregate_type, aggregate_id, last_version) VALUES ('points', 'User', 'locked', 0)`); err != nil {
		t.Fatal(err)
	}
	msgs := []kafka.Message{event{"blocked", "locked", 1, `{}`}.kafka("")}
	for i := 1; i <= 20; i++ {
		msgs = append(msgs, event{id(i), "u" + id(i), 1, `{}`}.kafka(""))
	}
	b := topicWith(t, 1, msgs...)
	tl := newTally(21)
	o := fastOptions(tl)
	var logs logtest.Lines
	o.MaxStoreWait, o.Metrics, o.Log = time.Second, inbox.NewMetrics(), logs.Logger()
	c, err := inbox.NewConsumer(s, func(context.Context, *sql.Tx, inbox.Message) (string, error) { return "", nil }, o)
	if err != nil {
		t.Fatal(err)
	}
	r := reader(b, "points")
	defer r.Close()
	start := time.Now()
	runUntil(t, c, r, tl)
	if got := parkedRows(t, db, "points"); len(got) != 1 || got["blocked"] != inbox.CodeRetriesExhausted {
		t.Fatalf("parked %v, want only the blocked message, retries_exhausted", got)
	}
	if tl.get(inbox.Applied) != 20 {
		t.Fatalf("outcomes %v, want the 20 behind it applied", tl.by)
	}
	if waited := time.Since(start); waited < o.MaxStoreWait {
		t.Fatalf("parked after %s, before MaxStoreWait %s", waited, o.MaxStoreWait)
	}
	if n := value(t, o.Metrics.Counter("inbox_store_fault_total", "points", "payments")); n < 2 {
		t.Fatalf("inbox_store_fault_total = %v, want the waited faults counted", n)
	}
	if logs.Count(`consumer database failed; waiting, not counted`, `"eventId":"blocked"`, `"source":"consumer database"`) == 0 {
		t.Error("no log line says the consumer database's fault was waited out")
	}
	if logs.Count(`"msg":"message failed; retrying"`, `"eventId":"blocked"`, `"source":"consumer database"`) == 0 {
		t.Error("no log line says the fault was counted once it outlasted MaxStoreWait")
	}
}
