package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/lib/pq"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/inbox"
)

// foldPoints is a batch handler as an application writes one: one multi-row upsert
// for the whole batch, folding several versions of one user into one row. It records
// each call's event ids.
func foldPoints(mu *sync.Mutex, calls *[][]string) inbox.BatchHandlerFunc {
	return func(ctx context.Context, tx *sql.Tx, msgs []inbox.Message) ([]string, error) {
		ids, users := make([]string, len(msgs)), make([]string, len(msgs))
		for i, m := range msgs {
			ids[i], users[i] = m.EventID, m.AggregateID
		}
		mu.Lock()
		*calls = append(*calls, ids)
		mu.Unlock()
		_, err := tx.ExecContext(ctx, `INSERT INTO points AS p
SELECT u, 10 * count(*) FROM unnest($1::text[]) AS t(u) GROUP BY u
ON CONFLICT (user_id) DO UPDATE SET total = p.total + EXCLUDED.total`, pq.Array(users))
		return nil, err
	}
}

// TestBatchHandlerAppliesABatchInOneCall: with NewBatchConsumer, a batch's messages
// reach the handler in one call, in offset order, without the duplicates and stale
// versions the dedup row and the version guard drop; every effect happens once.
func TestBatchHandlerAppliesABatchInOneCall(t *testing.T) {
	db, s := setup(t)
	var msgs []kafka.Message
	for i := 0; i < 300; i++ {
		msgs = append(msgs, event{id(i), "u" + id(i%20), int64(i/20 + 1), `{}`}.kafka(""))
	}
	// Event 5 already had its effect (a duplicate), and a replayed old version of u1 is stale.
	msgs = append(msgs, event{"old-u1", "u1", 1, `{}`}.kafka(""))
	pre, err := inbox.FromKafka(msgs[5])
	if err != nil {
		t.Fatal(err)
	}
	b := topicWith(t, 1, msgs...)
	var mu sync.Mutex
	var calls [][]string
	if _, err := s.Handle(context.Background(), pre, func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		_, err := foldPoints(&mu, &calls)(ctx, tx, []inbox.Message{m})
		return "", err
	}); err != nil {
		t.Fatal(err)
	}
	calls = nil
	tl := newTally(301)
	o := fastOptions(tl)
	o.BatchSize = 100
	c, err := inbox.NewBatchConsumer(s, foldPoints(&mu, &calls), o)
	if err != nil {
		t.Fatal(err)
	}
	r := reader(b, "points")
	defer r.Close()
	runUntil(t, c, r, tl)
	if tl.get(inbox.Applied) != 299 || tl.get(inbox.Duplicate) != 1 || tl.get(inbox.Stale) != 1 {
		t.Fatalf("outcomes %v, want 299 applied, 1 duplicate, 1 stale", tl.by)
	}
	var seen []string
	biggest := 0
	for _, call := range calls {
		seen = append(seen, call...)
		biggest = max(biggest, len(call))
	}
	if biggest < 2 {
		t.Fatalf("the batch handler was called %d times with at most %d message: not batched", len(calls), biggest)
	}
	var want []string
	for i := 0; i < 300; i++ {
		if i != 5 {
			want = append(want, id(i))
		}
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("the handler saw %d events (%v...), want the 299 new ones once each, in offset order", len(seen), seen[:min(len(seen), 10)])
	}
	var sum int
	if err := db.QueryRow(`SELECT sum(total) FROM points`).Scan(&sum); err != nil || sum != 3000 {
		t.Fatalf("sum %d (%v), want 3000: an effect was lost or doubled", sum, err)
	}
	nothingLeft(t, b, "points")
}

// TestBatchHandlerFailureFallsBackOneAtATime: the batch handler fails whenever its
// batch holds the poison message; the batch is rolled back and handled one message at
// a time, so the poison alone is retried MaxAttempts times and parked and every other
// message is applied once.
func TestBatchHandlerFailureFallsBackOneAtATime(t *testing.T) {
	db, s := setup(t)
	var msgs []kafka.Message
	for i := 0; i < 50; i++ {
		msgs = append(msgs, event{id(i), "u" + id(i%5), int64(i/5 + 1), `{}`}.kafka(""))
	}
	msgs[20] = event{"poison", "x", 1, `{}`}.kafka("") // u0 then skips version 5: a Gap, applied
	b := topicWith(t, 1, msgs...)
	var mu sync.Mutex
	var calls [][]string
	fold := foldPoints(&mu, &calls)
	fn := func(ctx context.Context, tx *sql.Tx, ms []inbox.Message) ([]string, error) {
		for _, m := range ms {
			if m.EventID == "poison" {
				return nil, errors.New("ledger rejects currency XXX")
			}
		}
		return fold(ctx, tx, ms)
	}
	tl := newTally(50)
	o := fastOptions(tl)
	o.BatchSize = 50
	c, err := inbox.NewBatchConsumer(s, fn, o)
	if err != nil {
		t.Fatal(err)
	}
	r := reader(b, "points")
	defer r.Close()
	runUntil(t, c, r, tl)
	if got := parkedRows(t, db, "points"); len(got) != 1 || got["poison"] != inbox.CodeRetriesExhausted || tl.get(inbox.Applied)+tl.get(inbox.Gap) != 49 {
		t.Fatalf("parked %v, outcomes %v: want only the poison parked and 49 applied", got, tl.by)
	}
	var sum int
	if err := db.QueryRow(`SELECT sum(total) FROM points`).Scan(&sum); err != nil || sum != 490 {
		t.Fatalf("sum %d (%v), want 490", sum, err)
	}
}
