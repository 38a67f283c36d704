package inbox

import (
	"context"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/startstop"
)

// router fetches messages and routes each to its partition's lane, which handles it.
type router struct {
	c     *Consumer
	r     Fetcher
	ctx   context.Context
	fail  context.CancelCauseFunc
	lanes map[topicPartition]*lane
	com   *committer
	held  []kafka.Message // fetched, not handed to a lane when ctx ended
}

// lane handles one partition's messages in offset order.
type lane struct {
	in         chan kafka.Message
	unfinished []kafka.Message // the batch in hand when the lane stopped
	task       *startstop.Task // the lane's loop (drive)
}

// run routes the leftovers of an earlier Run, then everything fetched, until ctx
// ends or the reader fails.
func (rt *router) run(leftovers []kafka.Message) error {
	rt.com = newCommitter(rt.r, rt.fail)
	rt.com.start(rt.ctx, rt.c.progress)
	for _, km := range leftovers {
		rt.route(km)
	}
	for rt.ctx.Err() == nil {
		rt.c.refreshHeld(rt.ctx)
		km, err := rt.r.FetchMessage(rt.ctx)
		if err != nil {
			return fetchErr(rt.ctx, err)
		}
		rt.route(km)
	}
	return context.Cause(rt.ctx)
}

func (rt *router) route(km kafka.Message) {
	if rt.c.o.Metrics != nil {
		rt.c.open.add(km)
	}
	tp := topicPartition{km.Topic, km.Partition}
	l, ok := rt.lanes[tp]
	if !ok {
		l = &lane{in: make(chan kafka.Message, 2*rt.c.o.BatchSize+1024)}
		rt.lanes[tp] = l
		// drive reads rt.ctx itself: its cause says why the lane ends.
		l.task = startstop.Start(rt.ctx, func(context.Context) { rt.drive(l) })
	}
	select {
	case l.in <- km: // a full lane (one retrying a message) holds the fetch back
	case <-rt.ctx.Done():
		rt.held = append(rt.held, km)
	}
}

// stop ends every lane and returns what was fetched and not committed, each
// partition's messages in offset order.
func (rt *router) stop() []kafka.Message {
	rt.fail(context.Canceled)
	for _, l := range rt.lanes {
		l.task.Wait()
	}
	out := rt.com.uncommitted() // handled: the next Run finds Duplicates and commits them
	for _, l := range rt.lanes {
		out = append(out, l.unfinished...)
		close(l.in)
		for km := range l.in {
			out = append(out, km)
		}
	}
	return append(out, rt.held...)
}

// drive runs a lane: take a batch, handle it, queue its offsets, repeat.
func (rt *router) drive(l *lane) {
	for {
		batch := rt.take(l)
		if batch == nil {
			return
		}
		if err := rt.c.handleBatch(rt.ctx, batch); err != nil {
			l.unfinished = batch
			if rt.ctx.Err() == nil {
				rt.fail(err) // a message that could not be parked: Run returns err
			}
			return
		}
		rt.com.add(batch)
	}
}

// take waits for a lane's next message, then gathers up to BatchSize, lingering at
// most BatchLinger for more. It returns nil when ctx ends with nothing in hand.
func (rt *router) take(l *lane) []kafka.Message {
	var batch []kafka.Message
	select {
	case km := <-l.in:
		batch = append(batch, km)
	case <-rt.ctx.Done():
		return nil
	}
	if rt.c.o.BatchSize == 1 {
		return batch
	}
	linger := time.NewTimer(rt.c.o.BatchLinger)
	defer linger.Stop()
	for len(batch) < rt.c.o.BatchSize {
		select {
		case km := <-l.in:
			batch = append(batch, km)
		case <-linger.C:
			return batch
		case <-rt.ctx.Done():
			return batch // handleBatch sees ctx and hands it back unfinished
		}
	}
	return batch
}
