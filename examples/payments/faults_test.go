package payments_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-operator/outbox-operator/inbox"
	"github.com/outbox-operator/outbox-operator/internal/testenv/kafkatest"
)

var errCrash = errors.New("injected crash between the database commit and the offset commit")

// crashingCommits is a group reader whose offset commit fails on the 1st, 8th, 15th
// ... call, after the inbox transaction of the batch committed: the consumer's Run
// returns as a process would die, and RunConsumer runs it again on the same reader.
type crashingCommits struct {
	*kafka.Reader
	calls, crashes atomic.Int64
}

func (c *crashingCommits) CommitMessages(ctx context.Context, msgs ...kafka.Message) error {
	if c.calls.Add(1)%7 == 1 {
		c.crashes.Add(1)
		return errCrash
	}
	return c.Reader.CommitMessages(ctx, msgs...)
}

// crashes wraps each group's reader in crashingCommits and remembers the wrappers.
type crashes struct {
	mu sync.Mutex
	by map[string]*crashingCommits
}

func (c *crashes) wrap(group string, r *kafka.Reader) inbox.Fetcher {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]*crashingCommits{}
	}
	w := &crashingCommits{Reader: r}
	c.by[group] = w
	return w
}

func (c *crashes) of(group string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.by[group]; w != nil {
		return w.crashes.Load()
	}
	return 0
}

// outcomes counts what each group's consumer reported, by outcome.
type outcomes struct {
	mu sync.Mutex
	by map[string]map[inbox.Outcome]int
}

func (o *outcomes) observe(group string) func(inbox.Message, inbox.Outcome) {
	return func(_ inbox.Message, out inbox.Outcome) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.by == nil {
			o.by = map[string]map[inbox.Outcome]int{}
		}
		if o.by[group] == nil {
			o.by[group] = map[inbox.Outcome]int{}
		}
		o.by[group][out]++
	}
}

func (o *outcomes) get(group string, out inbox.Outcome) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.by[group][out]
}

// redeliver writes the records of topic that pick selects a second time, each to
// its own partition (as a producer retry or a replay would), and returns them.
func redeliver(t *testing.T, b *kafkatest.Broker, want int, pick func(i int, r *kgo.Record) bool) []*kgo.Record {
	t.Helper()
	recs, err := b.ReadAllWithin(60*time.Second, topic, want)
	if err != nil {
		t.Fatalf("read %d records back: %v (got %d)", want, err, len(recs))
	}
	var dup []*kgo.Record
	for i, r := range recs {
		if pick(i, r) {
			dup = append(dup, &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers})
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, dup...).FirstErr(); err != nil {
		t.Fatalf("redeliver: %v", err)
	}
	return dup
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
