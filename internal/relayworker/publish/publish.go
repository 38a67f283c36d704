// Package publish turns claimed outbox rows into Kafka messages (docs/architecture.md,
// "Message contract"), writes them with a kafka-go Writer configured for durability,
// and classifies failures (classify.go).
//
// Writer settings, each against a kafka-go default that loses or reorders data:
//   - RequiredAcks = RequireAll: the zero value is RequireNone (fire and forget).
//   - Balancer = &kafka.Murmur2Balancer{}: the zero value is round-robin, which
//     ignores keys. Murmur2 (not kafka.Hash, which is FNV-1a) is the Java client's
//     default partitioner, so Java/franz-go producers of the same keys pick the same
//     partition and one aggregate stays on one partition whoever produces it.
//   - BatchTimeout = 100µs: the default 1s adds up to a second of latency per write,
//     and any wait here is pure latency: Publish hands each topic's messages to the
//     Writer in one call, and kafka-go appends a call's share of a partition to that
//     partition's batch under the partition's lock, so the batch timer cannot cut a
//     call's share in two, however short it is (it only decides when to send).
//   - BatchSize = the claim batch size and BatchBytes = 4 x MaxMessageBytes, and
//     Publish hands the Writer at most BatchBytes per call (chunks.go): one partition's
//     share of a call goes out as one produce request, so it succeeds or fails as a
//     unit and per-aggregate order in the batch is the order on the partition.
//   - WriteTimeout/ReadTimeout explicit; MaxAttempts 3 with short internal backoff:
//     the relay's own RETRY with backoff (persisted in the table) does the long waits.
//   - AllowAutoTopicCreation = false: a typo in a destination must not create topics.
package publish

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/contract"
)

// Options configure the Writer.
type Options struct {
	Brokers      []string
	BatchSize    int
	BatchTimeout time.Duration // default 100µs
	WriteTimeout time.Duration // default 10s
	// MaxMessageBytes bounds one message (key+value+headers); default 1 MiB, Kafka's
	// default message.max.bytes. Larger messages go DEAD without being sent.
	MaxMessageBytes int64

	TLS           bool
	TLSCAFile     string
	SASLMechanism string
	SASLUsername  string
	SASLPassword  string
}

// Publisher writes messages to Kafka.
type Publisher struct {
	w    *kafka.Writer
	opts Options // for the broker probe's own connections
	max  int64
	// chunk bounds the bytes (as Size counts them) of one WriteMessages call.
	chunk int64
}

// NewWriter builds the durable kafka-go Writer described in the package comment.
func NewWriter(o Options) (*kafka.Writer, error) {
	if o.BatchTimeout <= 0 {
		o.BatchTimeout = 100 * time.Microsecond
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.BatchSize <= 0 {
		o.BatchSize = contract.DefaultBatchSize
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 1 << 20
	}
	tr, err := newTransport(o)
	if err != nil {
		return nil, err
	}
	return &kafka.Writer{
		Addr:                   kafka.TCP(o.Brokers...),
		Balancer:               &kafka.Murmur2Balancer{},
		RequiredAcks:           kafka.RequireAll,
		BatchSize:              o.BatchSize,
		BatchBytes:             o.MaxMessageBytes * 4,
		BatchTimeout:           o.BatchTimeout,
		WriteTimeout:           o.WriteTimeout,
		ReadTimeout:            o.WriteTimeout,
		MaxAttempts:            3,
		WriteBackoffMin:        50 * time.Millisecond,
		WriteBackoffMax:        500 * time.Millisecond,
		AllowAutoTopicCreation: false,
		Transport:              tr,
		Completion:             complete,
	}, nil
}

// New builds a Publisher.
func New(o Options) (*Publisher, error) {
	w, err := NewWriter(o)
	if err != nil {
		return nil, err
	}
	max := o.MaxMessageBytes
	if max <= 0 {
		max = 1 << 20
	}
	return &Publisher{w: w, opts: o, max: max, chunk: w.BatchBytes}, nil
}

// Writer exposes the underlying kafka-go Writer (tests check its settings).
func (p *Publisher) Writer() *kafka.Writer { return p.w }

// Close flushes and closes the Writer.
func (p *Publisher) Close() error { return p.w.Close() }

// Result is the outcome of one message.
type Result struct {
	Partition int32 // -1 when unknown
	Offset    int64 // -1 when unknown
	Err       error
}

// slot receives the partition/offset from the Writer's Completion callback.
type slot struct {
	partition int32
	offset    int64
	done      bool
}

func complete(msgs []kafka.Message, err error) {
	if err != nil {
		return
	}
	for i := range msgs {
		if s, ok := msgs[i].WriterData.(*slot); ok {
			s.partition, s.offset, s.done = int32(msgs[i].Partition), msgs[i].Offset, true
		}
	}
}

// Publish writes msgs (already in per-aggregate order) and returns one Result per
// message. Messages are grouped by topic and each topic is written with its own
// WriteMessages call, concurrently, so one missing topic fails only its own messages.
func (p *Publisher) Publish(ctx context.Context, msgs []kafka.Message) []Result {
	res := make([]Result, len(msgs))
	slots := make([]slot, len(msgs))
	byTopic := map[string][]int{}
	var order []string
	for i := range msgs {
		res[i] = Result{Partition: -1, Offset: -1}
		if size := Size(msgs[i]); size > p.max {
			res[i].Err = kafka.MessageTooLargeError{Message: msgs[i]}
			continue
		}
		msgs[i].WriterData = &slots[i]
		t := msgs[i].Topic
		if _, ok := byTopic[t]; !ok {
			order = append(order, t)
		}
		byTopic[t] = append(byTopic[t], i)
	}
	var wg sync.WaitGroup
	for _, topic := range order {
		idx := byTopic[topic]
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.writeTopic(ctx, msgs, idx, res)
		}()
	}
	wg.Wait()
	for i := range msgs {
		if res[i].Err == nil && slots[i].done {
			res[i].Partition, res[i].Offset = slots[i].partition, slots[i].offset
		}
	}
	return res
}

// writeTopic writes one topic's messages (in per-aggregate order) chunk by chunk and
// stops at the first chunk that failed in a way a retry could fix: the chunks after
// it may hold newer versions of the failed events' aggregates, and sending those now
// would put them on the partition before the retried older ones. They are answered
// with ErrNotSent instead (the relay hands them back unsent).
func (p *Publisher) writeTopic(ctx context.Context, msgs []kafka.Message, idx []int, res []Result) {
	chunks := chunk(msgs, idx, p.chunk)
	for c, part := range chunks {
		if p.writeChunk(ctx, msgs, part, res) {
			continue
		}
		for _, later := range chunks[c+1:] {
			for _, i := range later {
				res[i].Err = ErrNotSent
			}
		}
		return
	}
}

// writeChunk writes msgs[idx...] with one WriteMessages call and reports whether
// later messages may still be sent: true when every message was stored or failed
// permanently (a DEAD event does not hold back its successors).
func (p *Publisher) writeChunk(ctx context.Context, msgs []kafka.Message, idx []int, res []Result) bool {
	batch := make([]kafka.Message, len(idx))
	for j, i := range idx {
		batch[j] = msgs[i]
	}
	err := p.w.WriteMessages(ctx, batch...)
	if err == nil {
		return true
	}
	var werrs kafka.WriteErrors
	if !errors.As(err, &werrs) || len(werrs) != len(batch) {
		for _, i := range idx {
			res[i].Err = err
		}
		return false
	}
	var tooLarge []int
	for j, e := range werrs {
		res[idx[j]].Err = e
		if c, code := Classify(e); c == Permanent && code == CodeMessageTooLarge {
			tooLarge = append(tooLarge, j)
		}
	}
	// The broker refuses a whole record batch as too large: find out which single
	// messages are at fault instead of killing the whole batch. One at a time, in
	// order, and not past a failure a retry could fix (same reason as writeTopic).
	if len(tooLarge) > 1 {
		held := false
		for _, j := range tooLarge {
			if held {
				res[idx[j]].Err = ErrNotSent
				continue
			}
			res[idx[j]].Err = p.w.WriteMessages(ctx, batch[j])
			held = retryable(res[idx[j]].Err)
		}
	}
	for _, i := range idx {
		if retryable(res[i].Err) {
			return false
		}
	}
	return true
}
