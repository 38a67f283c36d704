package inbox

import (
	"context"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/startstop"
)

// dispatcher fetches messages and hands each to its partition's lane.
type dispatcher struct {
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
func (d *dispatcher) run(leftovers []kafka.Message) error {
	d.com = newCommitter(d.r, d.fail)
	d.com.start(d.ctx, d.c.progress)
	for _, km := range leftovers {
		d.route(km)
	}
	for d.ctx.Err() == nil {
		d.c.refreshHeld(d.ctx)
		km, err := d.r.FetchMessage(d.ctx)
		if err != nil {
			return fetchErr(d.ctx, err)
		}
		d.route(km)
	}
	return context.Cause(d.ctx)
}

func (d *dispatcher) route(km kafka.Message) {
	if d.c.o.Metrics != nil {
		d.c.open.add(km)
	}
	tp := topicPartition{km.Topic, km.Partition}
	l, ok := d.lanes[tp]
	if !ok {
		l = &lane{in: make(chan kafka.Message, 2*d.c.o.BatchSize+1024)}
		d.lanes[tp] = l
		// drive reads d.ctx itself: its cause says why the lane ends.
		l.task = startstop.Start(d.ctx, func(context.Context) { d.drive(l) })
	}
	select {
	case l.in <- km: // a full lane (one retrying a message) holds the fetch back
	case <-d.ctx.Done():
		d.held = append(d.held, km)
	}
}

// stop ends every lane and returns what was fetched and not committed, each
// partition's messages in offset order.
func (d *dispatcher) stop() []kafka.Message {
	d.fail(context.Canceled)
	for _, l := range d.lanes {
		l.task.Wait()
	}
	out := d.com.uncommitted() // handled: the next Run finds Duplicates and commits them
	for _, l := range d.lanes {
		out = append(out, l.unfinished...)
		close(l.in)
		for km := range l.in {
			out = append(out, km)
		}
	}
	return append(out, d.held...)
}

// drive runs a lane: take a batch, handle it, queue its offsets, repeat.
func (d *dispatcher) drive(l *lane) {
	for {
		batch := d.take(l)
		if batch == nil {
			return
		}
		if err := d.c.handleBatch(d.ctx, batch); err != nil {
			l.unfinished = batch
			if d.ctx.Err() == nil {
				d.fail(err) // a message that could not be parked: Run returns err
			}
			return
		}
		d.com.add(batch)
	}
}

// take waits for a lane's next message, then gathers up to BatchSize, lingering at
// most BatchLinger for more. It returns nil when ctx ends with nothing in hand.
func (d *dispatcher) take(l *lane) []kafka.Message {
	var batch []kafka.Message
	select {
	case km := <-l.in:
		batch = append(batch, km)
	case <-d.ctx.Done():
		return nil
	}
	if d.c.o.BatchSize == 1 {
		return batch
	}
	linger := time.NewTimer(d.c.o.BatchLinger)
	defer linger.Stop()
	for len(batch) < d.c.o.BatchSize {
		select {
		case km := <-l.in:
			batch = append(batch, km)
		case <-linger.C:
			return batch
		case <-d.ctx.Done():
			return batch // handleBatch sees ctx and hands it back unfinished
		}
	}
	return batch
}
