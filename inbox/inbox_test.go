package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/inbox"
	"github.com/outbox-operator/outbox-operator/internal/testenv/kafkatest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { pgtest.Main(m, &srv) }

// setup returns a store for group "points" and a business table points(user_id, total).
func setup(t *testing.T) (*sql.DB, *inbox.Store) {
	t.Helper()
	_, db := srv.OpenDatabase(t)
	ctx := context.Background()
	if err := inbox.Migrate(ctx, db, "public"); err != nil {
		t.Fatal(err)
	}
	if err := inbox.Migrate(ctx, db, "public"); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if _, err := db.Exec(`CREATE TABLE points (user_id text PRIMARY KEY, total int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	s, err := inbox.New(db, "public", "points")
	if err != nil {
		t.Fatal(err)
	}
	return db, s
}

func addPoints(calls *atomic.Int32) inbox.HandlerFunc {
	return func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		calls.Add(1)
		_, err := tx.ExecContext(ctx, `INSERT INTO points VALUES ($1, 10) ON CONFLICT (user_id) DO UPDATE SET total = points.total + 10`, m.AggregateID)
		return "points:" + m.AggregateID, err
	}
}

func total(t *testing.T, db *sql.DB, user string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT total FROM points WHERE user_id = $1`, user).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func msg(id string, version int64, payload string) inbox.Message {
	return inbox.Message{EventID: id, EventType: "PaymentSucceeded", EventVersion: 1,
		AggregateType: "User", AggregateID: "u1", AggregateVersion: version, Payload: []byte(payload)}
}

func TestDuplicateDeliveryAppliesOnce(t *testing.T) {
	db, s := setup(t)
	var calls atomic.Int32
	ctx := context.Background()
	for i, want := range []inbox.Outcome{inbox.Applied, inbox.Duplicate, inbox.Duplicate} {
		got, err := s.Handle(ctx, msg("e1", 1, `{"amount":10}`), addPoints(&calls))
		if err != nil || got != want {
			t.Fatalf("delivery %d: outcome %v err %v, want %v", i, got, err, want)
		}
	}
	if calls.Load() != 1 || total(t, db, "u1") != 10 {
		t.Fatalf("handler ran %d times, total %d", calls.Load(), total(t, db, "u1"))
	}
	// Another consumer group handles the same event on its own.
	other, _ := inbox.New(db, "public", "notifications")
	if got, err := other.Handle(ctx, msg("e1", 1, `{"amount":10}`), func(context.Context, *sql.Tx, inbox.Message) (string, error) { return "", nil }); err != nil || got != inbox.Applied {
		t.Fatalf("other group: %v %v", got, err)
	}
}

func TestConcurrentDuplicatesRunHandlerOnce(t *testing.T) {
	db, s := setup(t)
	var calls atomic.Int32
	var wg sync.WaitGroup
	outcomes := make(chan inbox.Outcome, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := s.Handle(context.Background(), msg("e1", 1, `{}`), addPoints(&calls))
			if err != nil {
				t.Error(err)
			}
			outcomes <- o
		}()
	}
	wg.Wait()
	close(outcomes)
	applied := 0
	for o := range outcomes {
		if o == inbox.Applied {
			applied++
		}
	}
	if applied != 1 || calls.Load() != 1 || total(t, db, "u1") != 10 {
		t.Fatalf("applied=%d calls=%d total=%d", applied, calls.Load(), total(t, db, "u1"))
	}
}

func TestOlderVersionIsStale(t *testing.T) {
	db, s := setup(t)
	var calls atomic.Int32
	ctx := context.Background()
	if o, err := s.Handle(ctx, msg("e3", 3, `{}`), addPoints(&calls)); err != nil || o != inbox.Applied {
		t.Fatalf("v3: %v %v", o, err)
	}
	if o, err := s.Handle(ctx, msg("e2", 2, `{}`), addPoints(&calls)); err != nil || o != inbox.Stale {
		t.Fatalf("late v2: %v %v, want stale", o, err)
	}
	if o, err := s.Handle(ctx, msg("e2", 2, `{}`), addPoints(&calls)); err != nil || o != inbox.Duplicate {
		t.Fatalf("redelivered v2: %v %v, want duplicate", o, err)
	}
	if calls.Load() != 1 || total(t, db, "u1") != 10 {
		t.Fatalf("calls=%d total=%d", calls.Load(), total(t, db, "u1"))
	}
}

func TestSameIDDifferentPayloadIsConflict(t *testing.T) {
	_, s := setup(t)
	var calls atomic.Int32
	ctx := context.Background()
	if _, err := s.Handle(ctx, msg("e1", 1, `{"amount":10}`), addPoints(&calls)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Handle(ctx, msg("e1", 1, `{"amount":99}`), addPoints(&calls))
	if !errors.Is(err, inbox.ErrPayloadConflict) {
		t.Fatalf("err = %v, want ErrPayloadConflict", err)
	}
}

func TestHandlerErrorRollsBackDedupRow(t *testing.T) {
	db, s := setup(t)
	ctx := context.Background()
	boom := errors.New("downstream unavailable")
	_, err := s.Handle(ctx, msg("e1", 1, `{}`), func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO points VALUES ('u1', 10)`); err != nil {
			return "", err
		}
		return "", boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	var calls atomic.Int32
	if o, err := s.Handle(ctx, msg("e1", 1, `{}`), addPoints(&calls)); err != nil || o != inbox.Applied {
		t.Fatalf("redelivery after failure: %v %v, want applied", o, err)
	}
	if total(t, db, "u1") != 10 {
		t.Fatalf("total %d, want 10 (first attempt rolled back)", total(t, db, "u1"))
	}
}

func TestFromKafkaRejectsMessagesWithoutEventID(t *testing.T) {
	_, err := inbox.FromKafka(kafka.Message{Topic: "t", Value: []byte(`{}`)})
	if !errors.Is(err, inbox.ErrInvalidMessage) {
		t.Fatalf("err = %v", err)
	}
	_, err = inbox.FromKafka(kafka.Message{Headers: []kafka.Header{{Key: "event_id", Value: []byte("e")}, {Key: "aggregate_version", Value: []byte("x")}}})
	if !errors.Is(err, inbox.ErrInvalidMessage) {
		t.Fatalf("bad version: err = %v", err)
	}
}

// TestConsumeCommitsOffsetsAfterTheDatabase runs the loop against a Kafka-protocol
// broker with a consumer group: a duplicate on the topic is absorbed, and a second
// reader of the same group starts after the committed offsets.
func TestConsumeCommitsOffsetsAfterTheDatabase(t *testing.T) {
	db, s := setup(t)
	b, err := kafkatest.Start(1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.CreateTopic("payments", 1); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	hdr := func(id, v string) []kafka.Header {
		return []kafka.Header{{Key: "event_id", Value: []byte(id)}, {Key: "event_type", Value: []byte("PaymentSucceeded")},
			{Key: "aggregate_type", Value: []byte("User")}, {Key: "aggregate_id", Value: []byte("u1")}, {Key: "aggregate_version", Value: []byte(v)}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx,
		kafka.Message{Topic: "payments", Key: []byte("u1"), Value: []byte(`{}`), Headers: hdr("e1", "1")},
		kafka.Message{Topic: "payments", Key: []byte("u1"), Value: []byte(`{}`), Headers: hdr("e1", "1")},
		kafka.Message{Topic: "payments", Key: []byte("u1"), Value: []byte(`{}`), Headers: hdr("e2", "2")},
	); err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: b.Addrs(), GroupID: "points", Topic: "payments", MaxWait: 50 * time.Millisecond})
	// The process "crashes" after offset 2's local commit, before its offset commit.
	crashing := &crashBeforeAck{Reader: r, at: 2}
	var calls atomic.Int32
	seen := map[inbox.Outcome]int{}
	err = inbox.Consume(ctx, crashing, s, addPoints(&calls), func(_ inbox.Message, o inbox.Outcome) { seen[o]++ })
	if !errors.Is(err, errCrash) {
		t.Fatalf("Consume: %v", err)
	}
	r.Close()
	if seen[inbox.Applied] != 2 || seen[inbox.Duplicate] != 1 || total(t, db, "u1") != 20 {
		t.Fatalf("outcomes %v, total %d", seen, total(t, db, "u1"))
	}
	// The run crashed at the offset commit that carried offset 2, after offset 2's
	// transaction. The committer commits the newest handled offset of many messages at
	// once, so offsets 0 and 1 were committed before it or rode on that same commit,
	// as timing had it: the new member gets offset 2 again, with whichever earlier ones
	// shared the commit, and handling each again is a Duplicate with no second effect.
	r2 := kafka.NewReader(kafka.ReaderConfig{Brokers: b.Addrs(), GroupID: "points", Topic: "payments", MaxWait: 50 * time.Millisecond})
	defer r2.Close()
	for off := int64(-1); off < 2; {
		km, err := r2.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("re-fetch up to offset 2 (last %d): %v", off, err)
		}
		if off < 0 && km.Offset > 2 {
			t.Fatalf("re-fetched offset %d first, want 2 or less: offset 2's commit crashed", km.Offset)
		}
		off = km.Offset
		m, err := inbox.FromKafka(km)
		if err != nil {
			t.Fatal(err)
		}
		if o, err := s.Handle(ctx, m, addPoints(&calls)); err != nil || o != inbox.Duplicate {
			t.Fatalf("redelivered offset %d: %v %v, want duplicate", off, o, err)
		}
	}
	if calls.Load() != 2 || total(t, db, "u1") != 20 {
		t.Fatalf("calls %d total %d after redelivery", calls.Load(), total(t, db, "u1"))
	}
}

var errCrash = errors.New("simulated crash before ack")

type crashBeforeAck struct {
	*kafka.Reader
	at int64
}

func (c *crashBeforeAck) CommitMessages(ctx context.Context, msgs ...kafka.Message) error {
	for _, m := range msgs {
		if m.Offset == c.at {
			return errCrash
		}
	}
	return c.Reader.CommitMessages(ctx, msgs...)
}
