package inbox

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/pgerr"
)

// incoming is one fetched message and what FromKafka made of it.
type incoming struct {
	km  kafka.Message
	m   Message
	err error // ErrInvalidMessage: no contract headers
}

// handleBatch handles every message of batch: applied, duplicate, stale, gap or
// parked. It returns only when ctx ends (then nothing of batch may be committed).
func (c *Consumer) handleBatch(ctx context.Context, batch []kafka.Message) error {
	var ready []incoming
	for _, km := range batch {
		m, err := FromKafka(km)
		in := incoming{km: km, m: m, err: err}
		switch {
		case err != nil:
			if err := c.park(ctx, in, err, 1); err != nil {
				return err
			}
		case c.isHeld(m):
			if err := c.park(ctx, in, fmt.Errorf("%w: an earlier version of %s/%s is parked", errPredecessorParked, m.AggregateType, m.AggregateID), 0); err != nil {
				return err
			}
		default:
			ready = append(ready, in)
		}
	}
	for len(ready) > 0 {
		run := distinctRun(ready)
		if err := c.handleRun(ctx, run); err != nil {
			return err
		}
		ready = ready[len(run):]
	}
	return nil
}

// distinctRun is the longest prefix of ins without a repeated event id: a redelivery
// inside one batch is handled after its first delivery committed, so it is a
// Duplicate (or a payload conflict) like any other.
func distinctRun(ins []incoming) []incoming {
	seen := make(map[string]bool, len(ins))
	for i, in := range ins {
		if seen[in.m.EventID] {
			return ins[:i]
		}
		seen[in.m.EventID] = true
	}
	return ins
}

// handleRun handles distinct messages in one transaction; if any of them fails (or
// WaitForGaps meets a gap), it rolls back and handles them one at a time.
func (c *Consumer) handleRun(ctx context.Context, run []incoming) error {
	if len(run) == 1 {
		return c.handleOne(ctx, run[0])
	}
	for attempt := 1; ; attempt++ {
		outcomes, err := c.tryRun(ctx, run)
		switch {
		case err == nil:
			c.report(run, outcomes)
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case waitable(err):
			c.o.Log.Error(err, "consumer database failed; retrying the batch", "consumerGroup", c.s.group,
				"eventId", run[0].m.EventID, "messages", len(run), "attempt", attempt)
			if err := sleep(ctx, c.retry.Delay(attempt)); err != nil {
				return err
			}
		default: // a handler, a conflict or a gap: sort it out message by message
			for _, in := range run {
				if err := c.handleOne(ctx, in); err != nil {
					return err
				}
			}
			return nil
		}
	}
}

// handleOne tries one message by its error class until it is handled or parked.
func (c *Consumer) handleOne(ctx context.Context, in incoming) error {
	tries := 0
	for storeFaults := 1; ; {
		if c.isHeld(in.m) { // a predecessor was parked while this one waited
			return c.park(ctx, in, fmt.Errorf("%w: an earlier version of %s/%s is parked", errPredecessorParked, in.m.AggregateType, in.m.AggregateID), tries)
		}
		o, err := c.s.handle(ctx, in.m, c.fn, c.o.WaitForGaps)
		switch {
		case err == nil:
			c.report([]incoming{in}, []Outcome{o})
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case waitable(err): // not the message's fault: wait, do not count
			c.logFault(err, in, storeFaults)
			if err := sleep(ctx, c.retry.Delay(storeFaults)); err != nil {
				return err
			}
			storeFaults++
			continue
		}
		tries++
		class := ClassOf(err)
		limit, policy := c.o.MaxAttempts, c.retry
		if class == ClassWaiting {
			limit, policy = c.o.MaxWaitAttempts, c.wait
		}
		if class == ClassPermanent || tries >= limit {
			return c.park(ctx, in, err, tries)
		}
		c.o.Metrics.retry(c.s.group, in.km.Topic, in.m, class)
		c.o.Log.Info("handler failed; retrying", "consumerGroup", c.s.group, "eventId", in.m.EventID,
			"attempt", tries, "class", class.String(), "error", err.Error())
		if err := sleep(ctx, policy.Delay(tries)); err != nil {
			return err
		}
	}
}

func (c *Consumer) logFault(err error, in incoming, n int) {
	c.o.Log.Error(err, "consumer database failed; retrying", "consumerGroup", c.s.group,
		"eventId", in.m.EventID, "topic", in.km.Topic, "partition", in.km.Partition, "offset", in.km.Offset, "attempt", n)
}

// report tells Metrics and Observe what happened to committed messages.
func (c *Consumer) report(ins []incoming, outcomes []Outcome) {
	for i, in := range ins {
		c.o.Metrics.outcome(c.s.group, in.km.Topic, in.m, outcomes[i])
		if c.o.Observe != nil {
			c.o.Observe(in.m, outcomes[i])
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// waitable reports whether err is the consumer database's passing fault (down,
// connection lost, deadlock, out of resources): waited out, never charged to the
// message. Any other failure, even of inbox's own statements (a NUL byte in an event
// id, an aborted transaction the handler left behind), fails again the same way, so
// it counts as a try and the message is parked in the end instead of stalling its
// partition.
func waitable(err error) bool { return pgerr.IsTransient(err) }
