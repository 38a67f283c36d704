package inbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/inbox"
	"github.com/outbox-operator/outbox-operator/internal/testenv/kafkatest"
)

// event is one message written to the topic with the contract headers.
type event struct {
	id, agg string
	version int64
	payload string
}

func (e event) kafka(topic string) kafka.Message {
	h := func(k, v string) kafka.Header { return kafka.Header{Key: k, Value: []byte(v)} }
	return kafka.Message{Topic: topic, Key: []byte(e.agg), Value: []byte(e.payload), Headers: []kafka.Header{
		h(inbox.HeaderEventID, e.id), h(inbox.HeaderEventType, "PaymentSucceeded"), h(inbox.HeaderEventVersion, "1"),
		h(inbox.HeaderAggregateType, "User"), h(inbox.HeaderAggregateID, e.agg),
		h(inbox.HeaderAggregateVersion, strconv.FormatInt(e.version, 10)),
	}}
}

// topicWith starts a broker with a topic of `partitions` partitions holding msgs.
func topicWith(t *testing.T, partitions int32, msgs ...kafka.Message) *kafkatest.Broker {
	t.Helper()
	b, err := kafkatest.Start(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.CreateTopic("payments", partitions); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond,
		Balancer: &kafka.Hash{}, BatchSize: 1000}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range msgs {
		msgs[i].Topic = "payments"
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	return b
}

func reader(b *kafkatest.Broker, group string) *kafka.Reader {
	return kafka.NewReader(kafka.ReaderConfig{Brokers: b.Addrs(), GroupID: group, Topic: "payments",
		MaxWait: 50 * time.Millisecond, HeartbeatInterval: 200 * time.Millisecond})
}

// tally counts outcomes as a Consumer reports them, and says when it has seen n.
type tally struct {
	mu    sync.Mutex
	n     int
	by    map[inbox.Outcome]int
	order map[string][]int64 // aggregate -> versions in the order they were applied
	done  chan struct{}
	want  int
}

func newTally(want int) *tally {
	return &tally{by: map[inbox.Outcome]int{}, order: map[string][]int64{}, done: make(chan struct{}), want: want}
}

func (t *tally) observe(m inbox.Message, o inbox.Outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.by[o]++
	if o == inbox.Applied || o == inbox.Gap {
		t.order[m.AggregateID] = append(t.order[m.AggregateID], m.AggregateVersion)
	}
	t.n++
	if t.n == t.want {
		close(t.done)
	}
}

func (t *tally) get(o inbox.Outcome) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.by[o]
}

// runUntil runs c on a fresh group reader until the tally has seen all it wants,
// then stops it and checks that Run returned only because it was stopped.
func runUntil(t *testing.T, c *inbox.Consumer, r inbox.Fetcher, tl *tally) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx, r) }()
	select {
	case <-tl.done:
	case err := <-errc:
		cancel()
		t.Fatalf("Run returned early: %v (outcomes %v)", err, tl.by)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("timed out with outcomes %v", tl.by)
	}
	cancel()
	if err := <-errc; err != context.Canceled {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
}

// startRun runs c on r in the background for the rest of the test; at its end it
// stops Run, checks that Run returned only because it was stopped, and closes r.
func startRun(t *testing.T, c *inbox.Consumer, r *kafka.Reader) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx, r) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != context.Canceled {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
		r.Close()
	})
}

// parkedRows returns event_id -> error_code of the group's PARKED rows.
func parkedRows(t *testing.T, db *sql.DB, group string) map[string]string {
	t.Helper()
	rows, err := db.Query(`SELECT event_id, error_code FROM message_consume_parked WHERE consumer_group = $1 AND status = 'PARKED'`, group)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, code string
		if err := rows.Scan(&id, &code); err != nil {
			t.Fatal(err)
		}
		out[id] = code
	}
	return out
}

// committedUpTo reads the group's next message: nothing left means every offset
// was committed.
func nothingLeft(t *testing.T, b *kafkatest.Broker, group string) {
	t.Helper()
	r := reader(b, group)
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if km, err := r.FetchMessage(ctx); err == nil {
		t.Fatalf("group %s still has offset %d of partition %d uncommitted", group, km.Offset, km.Partition)
	}
}

func fail(format string, args ...any) error { return fmt.Errorf(format, args...) }

type (
	kafkaReader  = kafka.Reader
	kafkaMessage = kafka.Message
)

func id(i int) string { return strconv.Itoa(i) }

func fmtList(s []string) string { return fmt.Sprint(s) }
