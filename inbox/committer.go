package inbox

import (
	"context"
	"fmt"
	"sync"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/startstop"
)

// committer commits the offsets of handled messages in the background, many lanes'
// batches in one call: kafka-go serialises a group reader's commits, so lanes that
// each waited for their own commit would queue behind one another. An offset is only
// ever committed after its message's transaction committed (lanes add a batch once
// it is handled); a crash before the commit means a redelivery, which the dedup row
// turns into a Duplicate.
type committer struct {
	r    Fetcher
	fail context.CancelCauseFunc
	wake chan struct{}
	task *startstop.Task // the commit loop

	mu      sync.Mutex
	pending []kafka.Message // handled, offset not committed, in handling order
}

func newCommitter(r Fetcher, fail context.CancelCauseFunc) *committer {
	return &committer{r: r, fail: fail, wake: make(chan struct{}, 1)}
}

// start runs the commit loop until ctx ends.
func (c *committer) start(ctx context.Context, progress func([]kafka.Message)) {
	c.task = startstop.Start(ctx, func(ctx context.Context) { c.loop(ctx, progress) })
}

// add queues a handled batch for the next commit.
func (c *committer) add(batch []kafka.Message) {
	c.mu.Lock()
	c.pending = append(c.pending, batch...)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// loop commits whatever is pending each time a batch arrives, until ctx ends; then
// once more (bounded by commitTimeout), so a clean stop leaves nothing to redo.
func (c *committer) loop(ctx context.Context, progress func([]kafka.Message)) {
	for {
		select {
		case <-c.wake:
			if !c.flush(ctx, progress) {
				return
			}
		case <-ctx.Done():
			c.flush(ctx, progress)
			return
		}
	}
}

// flush commits the newest pending offset of each partition. On failure the messages
// stay pending (the caller hands them to the next Run) and Run is stopped.
func (c *committer) flush(ctx context.Context, progress func([]kafka.Message)) bool {
	c.mu.Lock()
	batch := c.pending
	c.pending = nil
	c.mu.Unlock()
	if len(batch) == 0 {
		return true
	}
	if err := commit(ctx, c.r, newestPerPartition(batch)); err != nil {
		c.mu.Lock()
		c.pending = append(batch, c.pending...)
		c.mu.Unlock()
		last := batch[len(batch)-1]
		c.fail(fmt.Errorf("inbox: commit offsets of %d messages (last %s/%d/%d): %w",
			len(batch), last.Topic, last.Partition, last.Offset, err))
		return false
	}
	progress(batch)
	return true
}

// uncommitted waits for the loop to end and returns what it could not commit.
func (c *committer) uncommitted() []kafka.Message {
	c.task.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending
}

func newestPerPartition(batch []kafka.Message) []kafka.Message {
	newest := map[topicPartition]int{}
	var out []kafka.Message
	for _, km := range batch {
		tp := topicPartition{km.Topic, km.Partition}
		if i, ok := newest[tp]; ok {
			if km.Offset > out[i].Offset {
				out[i] = km
			}
			continue
		}
		newest[tp] = len(out)
		out = append(out, km)
	}
	return out
}
