// consumer.go: a live franz-go consumer reading both of a run's topics from offset 0,
// as a downstream service would. It records when each event was first read, counts
// duplicates and checks per-aggregate order (a first read of a version older than one
// already read for that aggregate).

package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type consumer struct {
	w        *workload
	seen     []atomic.Int64 // seq -> unix nanos of the first read (0: not yet)
	distinct atomic.Int64
	dups     atomic.Int64
	foreign  atomic.Int64 // records without a parsable event id of this run
	reorders atomic.Int64
	maxVer   map[int]int64 // aggregate -> newest version read (consumer goroutine only)
	aggOf    func(seq int) (agg int, version int64)
	cl       *kgo.Client
	cancel   context.CancelFunc
	done     chan struct{}
	all      chan struct{} // closed when `want` distinct events were read
	want     int64
	allOnce  sync.Once
}

// startConsumer reads w's topics; capacity is the highest sequence number + 1 it can
// record; want distinct events close c.all.
func startConsumer(brokers string, w *workload, capacity, want int, aggOf func(int) (int, int64)) (*consumer, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers),
		kgo.ConsumeTopics(w.topics[0], w.topics[1]),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(time.Second))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{w: w, seen: make([]atomic.Int64, capacity), maxVer: map[int]int64{}, aggOf: aggOf,
		cl: cl, cancel: cancel, done: make(chan struct{}), all: make(chan struct{}), want: int64(want)}
	go c.loop(ctx)
	return c, nil
}

func (c *consumer) loop(ctx context.Context) {
	defer close(c.done)
	for ctx.Err() == nil {
		fs := c.cl.PollFetches(ctx)
		now := time.Now().UnixNano()
		fs.EachRecord(func(r *kgo.Record) { c.record(r, now) })
	}
}

func (c *consumer) record(r *kgo.Record, now int64) {
	seq := -1
	for _, h := range r.Headers {
		if h.Key == "event_id" {
			seq = c.w.seqOf(h.Value)
			break
		}
	}
	if seq < 0 || seq >= len(c.seen) {
		c.foreign.Add(1)
		return
	}
	if !c.seen[seq].CompareAndSwap(0, now) {
		c.dups.Add(1)
		return
	}
	if agg, v := c.aggOf(seq); v > 0 {
		if v < c.maxVer[agg] {
			c.reorders.Add(1)
		} else {
			c.maxVer[agg] = v
		}
	}
	if c.distinct.Add(1) == c.want {
		c.allOnce.Do(func() { close(c.all) })
	}
}

// waitAll waits until every wanted event was read or the timeout passed.
func (c *consumer) waitAll(timeout time.Duration) bool {
	select {
	case <-c.all:
		return true
	case <-time.After(timeout):
		return false
	}
}

func (c *consumer) close() {
	c.cancel()
	<-c.done
	c.cl.Close()
}
