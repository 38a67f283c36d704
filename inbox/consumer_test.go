package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/inbox"
)

func fastOptions(tl *tally) inbox.Options {
	return inbox.Options{MaxAttempts: 3, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		WaitBackoff: time.Millisecond, MaxWaitAttempts: 2, Observe: tl.observe}
}

// TestPoisonIsParkedAfterItsAttemptsAndLaterMessagesFlow: one event fails every time
// with a retryable error; it is tried MaxAttempts times, parked, and the 20 messages
// behind it on the same partition are applied; every offset is committed.
func TestPoisonIsParkedAfterItsAttemptsAndLaterMessagesFlow(t *testing.T) {
	db, s := setup(t)
	msgs := []kafka.Message{event{"poison", "u1", 1, `{}`}.kafka("")}
	for i := 0; i < 20; i++ {
		msgs = append(msgs, event{fmt.Sprintf("e%d", i), "u1", int64(i + 2), `{}`}.kafka(""))
	}
	b := topicWith(t, 1, msgs...)
	var poisonTries atomic.Int32
	var calls atomic.Int32
	fn := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		if m.EventID == "poison" {
			poisonTries.Add(1)
			return "", errors.New("projection service refused")
		}
		return addPoints(&calls)(ctx, tx, m)
	}
	tl := newTally(21)
	m := inbox.NewMetrics()
	o := fastOptions(tl)
	o.Metrics = m
	c, err := inbox.NewConsumer(s, fn, o)
	if err != nil {
		t.Fatal(err)
	}
	r := reader(b, "points")
	runUntil(t, c, r, tl)
	r.Close()
	if poisonTries.Load() != 3 || tl.get(inbox.Parked) != 1 || tl.get(inbox.Applied) != 20 {
		t.Fatalf("poison tried %d times, outcomes %v; want 3 tries, 1 parked, 20 applied", poisonTries.Load(), tl.by)
	}
	if got := parkedRows(t, db, "points"); got["poison"] != inbox.CodeRetriesExhausted || len(got) != 1 {
		t.Fatalf("parked rows %v", got)
	}
	var attempts int
	var payload []byte
	if err := db.QueryRow(`SELECT attempts, payload FROM message_consume_parked WHERE event_id = 'poison'`).Scan(&attempts, &payload); err != nil || attempts != 3 || string(payload) != `{}` {
		t.Fatalf("parked row: attempts %d payload %q err %v", attempts, payload, err)
	}
	if total(t, db, "u1") != 200 {
		t.Fatalf("total %d, want 200 (20 applied events)", total(t, db, "u1"))
	}
	if n, err := s.ParkedCount(context.Background()); err != nil || n != 1 {
		t.Fatalf("ParkedCount = %d, %v", n, err)
	}
	if ps, err := s.Parked(context.Background(), 10); err != nil || len(ps) != 1 || ps[0].EventID != "poison" ||
		ps[0].Attempts != 3 || ps[0].ErrorCode != inbox.CodeRetriesExhausted || ps[0].Offset != 0 {
		t.Fatalf("Parked = %+v, %v", ps, err)
	}
	if got := value(t, m.Counter("inbox_consume_dead_total", "points", "payments", "PaymentSucceeded", inbox.CodeRetriesExhausted)); got != 1 {
		t.Errorf("inbox_consume_dead_total = %v, want 1", got)
	}
	if got := value(t, m.Counter("inbox_consume_retry_total", "points", "payments", "PaymentSucceeded", "retryable")); got != 2 {
		t.Errorf("inbox_consume_retry_total = %v, want 2", got)
	}
	nothingLeft(t, b, "points")
}

// TestBadMessagesAreParkedWithTheirReason: a permanent error, a conflicting payload
// under a known event id, a message without contract headers and a handler panic are
// each parked at once with their code, and the message after each is applied.
func TestBadMessagesAreParkedWithTheirReason(t *testing.T) {
	db, s := setup(t)
	msgs := []kafka.Message{
		event{"ok1", "u1", 1, `{"amount":10}`}.kafka(""),
		event{"ok1", "u1", 1, `{"amount":99}`}.kafka(""), // same id, other content
		{Key: []byte("u1"), Value: []byte(`{}`)},         // no headers at all
		event{"refused", "u1", 2, `{}`}.kafka(""),
		event{"panics", "u1", 3, `{}`}.kafka(""),
		event{"ok2", "u1", 4, `{}`}.kafka(""),
	}
	b := topicWith(t, 1, msgs...)
	var calls atomic.Int32
	fn := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		switch m.EventID {
		case "refused":
			return "", inbox.Permanent(errors.New("account closed"))
		case "panics":
			panic("nil map in handler")
		}
		return addPoints(&calls)(ctx, tx, m)
	}
	tl := newTally(6)
	c, err := inbox.NewConsumer(s, fn, fastOptions(tl))
	if err != nil {
		t.Fatal(err)
	}
	r := reader(b, "points")
	runUntil(t, c, r, tl)
	r.Close()
	got := parkedRows(t, db, "points")
	want := map[string]string{"ok1": inbox.CodePayloadConflict, "": inbox.CodeInvalidMessage,
		"refused": inbox.CodePermanent, "panics": inbox.CodeHandlerPanic}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("parked %v, want %v", got, want)
	}
	// ok2 (version 4) comes after ok1 (1) with 2 and 3 parked: applied, reported as a gap.
	if calls.Load() != 2 || total(t, db, "u1") != 20 || tl.get(inbox.Applied) != 1 || tl.get(inbox.Gap) != 1 {
		t.Fatalf("calls %d total %d outcomes %v; want ok1 applied and ok2 applied as a gap", calls.Load(), total(t, db, "u1"), tl.by)
	}
	nothingLeft(t, b, "points")
}

func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	if c == nil {
		t.Fatal("no such counter")
	}
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestPoisonSentTwiceIsOneParkedRow: the same bad event at two offsets (sent twice)
// is one parked row with the attempts of both, counted once.
func TestPoisonSentTwiceIsOneParkedRow(t *testing.T) {
	db, s := setup(t)
	poison := event{"poison", "u1", 1, `{}`}.kafka("")
	b := topicWith(t, 1, poison, event{"ok", "u2", 1, `{}`}.kafka(""), poison)
	var calls atomic.Int32
	fn := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		if m.EventID == "poison" {
			return "", inbox.Permanent(errors.New("cannot decode"))
		}
		return addPoints(&calls)(ctx, tx, m)
	}
	tl := newTally(3)
	o := fastOptions(tl)
	o.Metrics = inbox.NewMetrics()
	c, err := inbox.NewConsumer(s, fn, o)
	if err != nil {
		t.Fatal(err)
	}
	r := reader(b, "points")
	defer r.Close()
	runUntil(t, c, r, tl)
	var rows, attempts int
	if err := db.QueryRow(`SELECT count(*), sum(attempts) FROM message_consume_parked WHERE event_id = 'poison'`).Scan(&rows, &attempts); err != nil || rows != 1 || attempts != 2 {
		t.Fatalf("parked rows %d with %d attempts (%v), want 1 row with 2", rows, attempts, err)
	}
	if got := value(t, o.Metrics.Counter("inbox_consume_dead_total", "points", "payments", "PaymentSucceeded", inbox.CodePermanent)); got != 1 || tl.get(inbox.Parked) != 2 {
		t.Fatalf("dead counter %v, parked outcomes %d; want 1 and 2", got, tl.get(inbox.Parked))
	}
}

// TestMessageTheDatabaseRefusesIsParked: an event id with a NUL byte makes the
// consumer's own statement fail (PostgreSQL refuses NUL in text). That is no passing
// fault: the message is tried MaxAttempts times, then parked (its text cleaned so the
// parking table takes it) and the next message flows; the partition never stalls.
func TestMessageTheDatabaseRefusesIsParked(t *testing.T) {
	db, s := setup(t)
	b := topicWith(t, 1, event{"bad\x00id", "u1", 1, `{}`}.kafka(""), event{"ok", "u2", 1, `{}`}.kafka(""))
	var calls atomic.Int32
	tl := newTally(2)
	c, err := inbox.NewConsumer(s, addPoints(&calls), fastOptions(tl))
	if err != nil {
		t.Fatal(err)
	}
	r := reader(b, "points")
	defer r.Close()
	runUntil(t, c, r, tl)
	if got := parkedRows(t, db, "points"); got["badid"] != inbox.CodeRetriesExhausted || len(got) != 1 || total(t, db, "u2") != 10 {
		t.Fatalf("parked %v, u2 total %d; want the bad id parked after its tries and ok applied", got, total(t, db, "u2"))
	}
}
