package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
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

// TestUnreachableDatabaseIsWaitedForBeyondMaxStoreWait: the consumer database is
// killed (SIGKILL) before the consumer handles anything and stays down for ten times
// MaxStoreWait, far longer than MaxStoreWait plus MaxAttempts tries. A lost connection
// is no fault of the message, and its park could not be written anyway, so nothing is
// counted or parked and Run does not fail: the partitions wait (counted in
// inbox_store_fault_total, logged as unreachable with no wait limit), and once the
// database is back every message is applied, once. Both with BatchSize 1 and with
// batches.
func TestUnreachableDatabaseIsWaitedForBeyondMaxStoreWait(t *testing.T) {
	for _, batch := range []int{1, 50} {
		t.Run(fmt.Sprintf("BatchSize%d", batch), func(t *testing.T) {
			db, s := setup(t)
			var msgs []kafka.Message
			for i := 0; i < 20; i++ {
				msgs = append(msgs, event{id(i), "u" + id(i%4), int64(i/4 + 1), `{}`}.kafka(""))
			}
			b := topicWith(t, 2, msgs...)
			tl := newTally(20)
			o := fastOptions(tl)
			var logs logtest.Lines
			o.BatchSize, o.MaxStoreWait, o.MaxBackoff = batch, 200*time.Millisecond, 50*time.Millisecond
			o.Metrics, o.Log = inbox.NewMetrics(), logs.Logger()
			c, err := inbox.NewConsumer(s, addPoints(new(atomic.Int32)), o)
			if err != nil {
				t.Fatal(err)
			}
			r := reader(b, "points")
			defer r.Close()

			// The server is shared by the package's tests: whatever happens here, it is
			// running again when this test ends.
			t.Cleanup(func() {
				if !srv.Running() {
					if err := srv.Restart(); err != nil {
						t.Errorf("restart the database: %v", err)
					}
				}
			})
			if err := srv.Kill9(); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- c.Run(ctx, r) }()
			faults := func() float64 {
				return value(t, o.Metrics.Counter("inbox_store_fault_total", "points", "payments"))
			}
			down := 10 * o.MaxStoreWait
			waitFor(t, 60*time.Second, fmt.Sprintf("the consumer to wait on the dead database for %s", down), func() (float64, bool) {
				select {
				case err := <-errc:
					t.Fatalf("Run returned while the database was down: %v (outcomes %v)", err, tl.by)
				default:
				}
				n := faults()
				return n, n >= 10 && time.Since(killed) >= down
			})
			if n := tl.get(inbox.Parked); n != 0 {
				t.Fatalf("%d messages parked while the database was down", n)
			}
			if n := logs.Count(`"msg":"message failed; retrying"`); n != 0 {
				t.Fatalf("%d tries counted against messages while the database was down: %v", n, logs.With(`"msg":"message failed; retrying"`))
			}
			if logs.Count(`consumer database unreachable`, `"source":"consumer database"`, `"waitLimit":"none"`) == 0 {
				t.Fatal("no log line says the consumer database is unreachable and is waited for")
			}

			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-tl.done:
			case err := <-errc:
				t.Fatalf("Run returned after the database came back: %v (outcomes %v)", err, tl.by)
			case <-time.After(60 * time.Second):
				t.Fatalf("outcomes %v 60s after the database came back, want 20 applied", tl.by)
			}
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("Run = %v, want context.Canceled", err)
			}
			if got := parkedRows(t, db, "points"); len(got) != 0 || tl.get(inbox.Applied) != 20 {
				t.Fatalf("parked %v, outcomes %v: want 20 applied and nothing parked", got, tl.by)
			}
			var sum int
			if err := db.QueryRow(`SELECT sum(total) FROM points`).Scan(&sum); err != nil {
				t.Fatal(err)
			}
			if sum != 200 {
				t.Fatalf("sum of points %d, want 200: an effect was lost or doubled", sum)
			}
		})
	}
}
