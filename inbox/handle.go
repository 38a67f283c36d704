package inbox

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/trace"

	"github.com/outbox-operator/outbox-operator/internal/pgerr"
)

// incoming is one fetched message and what FromKafka made of it.
type incoming struct {
	km  kafka.Message
	m   Message
	err error // ErrInvalidMessage: no contract headers
	// ctx is the consumer's ctx with the message's consumer span (trace.go): the
	// handler's context.
	ctx  context.Context
	span trace.Span
}

// handleBatch handles every message of batch: applied, duplicate, stale, gap or
// parked. It returns an error only when ctx ends or a message could not be parked
// (then nothing of batch may be committed).
func (c *Consumer) handleBatch(ctx context.Context, batch []kafka.Message) error {
	var ready []incoming
	all := make([]incoming, 0, len(batch))
	defer func() { abandonSpans(all) }()
	for _, km := range batch {
		m, err := FromKafka(km)
		in := incoming{km: km, m: m, err: err}
		in.ctx, in.span = c.startSpan(ctx, km, m)
		all = append(all, in)
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
// WaitForGaps meets a gap), it rolls back and handles them one at a time, so only the
// bad message is retried and parked. A passing fault of inbox's own statements is
// waited out for the whole batch (storeWait.waitOut: a lost connection for as long
// as it lasts, any other fault for at most MaxStoreWait).
func (c *Consumer) handleRun(ctx context.Context, run []incoming) error {
	if len(run) == 1 {
		return c.handleOne(ctx, run[0])
	}
	var faults storeWait
	for {
		outcomes, err := c.tryRun(ctx, run)
		switch {
		case err == nil:
			c.report(run, outcomes)
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case storeFault(err) && faults.waitOut(err, c.o.MaxStoreWait):
			c.logFault(err, run[0], faults.n, len(run))
			if err := sleep(ctx, c.retry.Delay(faults.n)); err != nil {
				return err
			}
			continue
		}
		// a handler, a conflict, a gap or a fault that outlasted MaxStoreWait:
		// sort it out message by message
		for _, in := range run {
			if err := c.handleOne(ctx, in); err != nil {
				return err
			}
		}
		return nil
	}
}

// storeWait tracks the passing faults of inbox's own statements met by one message
// (or batch): how many, and since when.
type storeWait struct {
	n     int
	since time.Time // the first fault that within bounds
}

// waitOut counts one more fault (err) of inbox's own statements for a message and
// reports whether it is waited out without counting a try. A lost connection to the
// consumer database always is: with the database unreachable the message cannot be
// at fault, and its park could not be written either, so counting would only park a
// healthy message (retries_exhausted) once the database is back. Its partition stays
// stopped meanwhile, reported by inbox_store_fault_total, a log line per try and
// inbox_oldest_unhandled_message_age_seconds (InboxConsumerStuck). Any other passing
// fault (a lock or statement timeout, a deadlock, a server short of resources) can be
// the message's own, such as a lock held forever on its version row, so it is waited
// out for max from the first such fault only, then counts.
func (w *storeWait) waitOut(err error, max time.Duration) bool {
	if pgerr.IsConnection(err) {
		w.n++
		return true
	}
	return w.within(max)
}

// within counts one more fault and reports whether the message may still wait it out
// uncounted: the first fault was less than max ago.
func (w *storeWait) within(max time.Duration) bool {
	w.n++
	if w.since.IsZero() {
		w.since = time.Now()
	}
	return time.Since(w.since) < max
}

// handleOne tries one message by its error class until it is handled or parked. The
// handler's error counts by its class only; a passing fault of inbox's own statements
// is waited out uncounted (storeWait.waitOut: a lost connection for as long as it
// lasts, any other fault for MaxStoreWait, then it counts as Retryable).
func (c *Consumer) handleOne(ctx context.Context, in incoming) error {
	tries := 0
	var faults storeWait
	for {
		if c.isHeld(in.m) { // a predecessor was parked while this one waited
			return c.park(ctx, in, fmt.Errorf("%w: an earlier version of %s/%s is parked", errPredecessorParked, in.m.AggregateType, in.m.AggregateID), tries)
		}
		o, err := c.s.handle(in.ctx, in.m, c.fn, c.o.WaitForGaps)
		switch {
		case err == nil:
			c.report([]incoming{in}, []Outcome{o})
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case storeFault(err) && faults.waitOut(err, c.o.MaxStoreWait): // not the message's fault: wait, do not count
			c.logFault(err, in, faults.n, 1)
			if err := sleep(ctx, c.retry.Delay(faults.n)); err != nil {
				return err
			}
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
		c.o.Log.Info("message failed; retrying", "consumerGroup", c.s.group, "eventId", in.m.EventID,
			"topic", in.km.Topic, "partition", in.km.Partition, "offset", in.km.Offset,
			"attempt", tries, "class", class.String(), "source", source(err), "error", err.Error())
		if err := sleep(ctx, policy.Delay(tries)); err != nil {
			return err
		}
	}
}

// logFault reports a passing fault of inbox's own statements that is waited out, not
// counted against the message (or the batch of n it starts). The line says which
// rule applies: a lost connection is waited for without a limit, any other fault for
// MaxStoreWait.
func (c *Consumer) logFault(err error, in incoming, n, messages int) {
	c.o.Metrics.storeFault(c.s.group, in.km.Topic)
	msg, limit := "consumer database failed; waiting, not counted against the message", c.o.MaxStoreWait.String()
	if pgerr.IsConnection(err) {
		msg, limit = "consumer database unreachable; waiting for it, not counted against the message, the partition stopped", "none"
	}
	c.o.Log.Error(err, msg, "consumerGroup", c.s.group,
		"eventId", in.m.EventID, "topic", in.km.Topic, "partition", in.km.Partition, "offset", in.km.Offset,
		"messages", messages, "attempt", n, "source", "consumer database", "waitLimit", limit)
}

// report tells Metrics and Observe what happened to committed messages.
func (c *Consumer) report(ins []incoming, outcomes []Outcome) {
	for i, in := range ins {
		c.o.Metrics.outcome(c.s.group, in.km.Topic, in.m, outcomes[i])
		endSpan(in, outcomes[i], nil)
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
