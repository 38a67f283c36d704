package inbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/backoff"
	"github.com/outbox-operator/outbox-operator/internal/pgerr"
	"github.com/outbox-operator/outbox-operator/internal/startstop"
)

// Fetcher is the part of *kafka.Reader that a Consumer uses.
type Fetcher interface {
	FetchMessage(ctx context.Context) (kafka.Message, error)
	CommitMessages(ctx context.Context, msgs ...kafka.Message) error
}

// Consumer reads messages with FetchMessage, handles each with its HandlerFunc in a
// local transaction with the dedup row, and commits the offsets only after that
// transaction committed. It never stops on one bad message: a failing one is retried
// in place by its error class and then parked (ParkedTable), and later messages flow.
type Consumer struct {
	s       *Store
	fn      HandlerFunc
	batchFn BatchHandlerFunc // NewBatchConsumer: fn is batchFn on one message
	o       Options
	retry   backoff.Policy
	wait    backoff.Policy

	mu      sync.Mutex
	held    map[aggKey]bool // aggregates with a parked message (HoldAggregateOnPark)
	heldAt  time.Time
	lag     map[topicPartition]int64
	left    leftovers   // fetched, not committed, of the reader the last Run ran on
	running atomic.Bool // a Run is running: one at a time (see leftovers)
	open    unhandled   // fetched by the running Run, not yet committed (with Metrics)
}

type topicPartition struct {
	topic     string
	partition int
}

// NewConsumer checks o and returns a Consumer for s's consumer group.
func NewConsumer(s *Store, fn HandlerFunc, o Options) (*Consumer, error) {
	if s == nil || fn == nil {
		return nil, errors.New("inbox: NewConsumer needs a Store and a HandlerFunc")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Consumer{
		s: s, fn: fn, o: o,
		retry: backoff.Policy{Min: o.Backoff, Max: o.MaxBackoff},
		wait:  backoff.Policy{Min: o.WaitBackoff, Max: 4 * o.MaxBackoff},
		lag:   map[topicPartition]int64{},
	}, nil
}

// Consume is NewConsumer(s, fn, Options{Observe: observe}).Run(ctx, r): one message
// per transaction, default retries and parking. Its Consumer lives for one call, so
// the messages it fetched and did not commit go with it: its error then says how
// many, and r must be closed (a new reader starts at the committed offset). To call
// Run again on the same reader, use NewConsumer.
func Consume(ctx context.Context, r Fetcher, s *Store, fn HandlerFunc, observe func(Message, Outcome)) error {
	c, err := NewConsumer(s, fn, Options{Observe: observe})
	if err != nil {
		return err
	}
	err = c.Run(ctx, r)
	if n := c.left.count(r); n > 0 {
		return fmt.Errorf("%w (%d fetched messages were not committed and this reader has moved past them: close it and open a new one, or use NewConsumer and Run again on it)", err, n)
	}
	return err
}

// Run consumes until ctx ends (it then returns ctx.Err()), the reader fails, an
// offset commit fails, or a message cannot be parked (the error names it). A
// database that is down is waited for, with backoff, not reported as an error: the
// message is no less valid for it (for MaxStoreWait per message, then it counts).
//
// Each partition has a lane of its own: its messages are handled in offset order,
// one transaction (or batch) at a time, while other partitions' lanes run beside it.
// Durable commits cost a WAL flush each; lanes let PostgreSQL flush several at once.
//
// Messages fetched and not yet committed when Run returns are kept by c for r: the
// next Run of c on the same reader handles them first. kafka-go has already moved
// past them, so without that a second call would skip them silently. r must
// therefore be comparable (a pointer such as *kafka.Reader); Run refuses one that is
// not.
//
// A Consumer runs on one reader at a time: Run returns an error at once while
// another Run of c is running (make one Consumer per reader; they may share a Store
// and Metrics). A Run on a reader other than the last one releases that reader's
// uncommitted messages (logged with their number): the old reader is taken to be
// closed, as a reader that failed must be, and the group redelivers them from the
// committed offset. Do not run c on the old reader again: it is past them.
func (c *Consumer) Run(ctx context.Context, r Fetcher) error {
	if err := trackable(r); err != nil {
		return err
	}
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("inbox: this Consumer is already running: it runs on one reader at a time (make one Consumer per reader)")
	}
	defer c.running.Store(false)
	if err := c.s.prepare(ctx); pgerr.IsUndefinedTable(err) {
		return fmt.Errorf("inbox: the consumer tables are missing (run inbox.Migrate): %w", err)
	} // any other fault (a database not up yet) is waited out per message
	if c.o.HoldAggregateOnPark {
		if err := c.loadHeld(ctx); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	replays := startstop.Start(ctx, c.serveReplays)
	rt := &router{c: c, r: r, ctx: ctx, fail: cancel, lanes: map[topicPartition]*lane{}}
	c.o.Metrics.watch(c)
	left, released := c.left.take(r)
	if released > 0 {
		c.o.Log.Info("released the uncommitted messages of the reader the last Run ran on; the group redelivers them from its committed offset",
			"consumerGroup", c.s.group, "messages", released)
	}
	err := rt.run(left)
	c.left.keep(r, rt.stop()) // stop cancels ctx: the replay server ends too
	c.o.Metrics.unwatch(c)
	c.open.reset()
	replays.Stop()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause // a lane's offset commit failed
	}
	return err
}

// commitTimeout bounds the offset commit of a batch that was handled when ctx ended:
// committing it spares the next member of the group a round of duplicates.
const commitTimeout = 5 * time.Second

func commit(ctx context.Context, r Fetcher, batch []kafka.Message) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	return r.CommitMessages(cctx, batch...)
}

func fetchErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return fmt.Errorf("inbox: fetch: %w", err)
}

// progress updates the lag and age gauges from a committed batch.
func (c *Consumer) progress(batch []kafka.Message) {
	if c.o.Metrics == nil {
		return
	}
	c.open.committed(batch)
	oldest := map[string]time.Time{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, km := range batch {
		c.lag[topicPartition{km.Topic, km.Partition}] = max(km.HighWaterMark-km.Offset-1, 0)
		if t, ok := oldest[km.Topic]; !ok || km.Time.Before(t) {
			oldest[km.Topic] = km.Time
		}
	}
	now := time.Now()
	for topic, t := range oldest {
		var lag int64
		for tp, l := range c.lag {
			if tp.topic == topic {
				lag += l
			}
		}
		c.o.Metrics.progress(c.s.group, topic, lag, t, now)
	}
}
