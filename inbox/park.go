package inbox

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// parkTries bounds the tries of a park the parking table refuses (not a passing
// fault): a row refused three times is refused for good.
const parkTries = 3

// park records in as parked, then counts, logs and optionally dead-letters it. Only
// after park returned nil may the message's offset be committed. A lost connection
// to the consumer database is waited out for as long as it lasts (storeWait.waitOut),
// any other passing fault for MaxStoreWait; a refused row (the parking table rejects
// it) is tried parkTries times. Then park returns an error naming the message, which
// ends Run: its offset stays uncommitted, nothing is dropped.
func (c *Consumer) park(ctx context.Context, in incoming, cause error, attempts int) error {
	code := parkCode(cause)
	row := parkedRow{km: in.km, m: in.m, code: code, err: cause, attempts: attempts}
	var fresh bool
	var faults storeWait
	for refused := 0; ; {
		var err error
		if fresh, err = c.s.park(ctx, row); err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		transient := storeFault(err)
		if !transient {
			refused++
		}
		var wait bool
		if transient {
			wait = faults.waitOut(err, c.o.MaxStoreWait)
		} else { // a refused row: parkTries bounds it, and MaxStoreWait too
			wait = faults.within(c.o.MaxStoreWait)
		}
		if !wait || refused >= parkTries {
			return fmt.Errorf("inbox: could not park event %q (topic %s, partition %d, offset %d; code %s) after %d tries, so its offset is not committed: %w",
				in.m.EventID, in.km.Topic, in.km.Partition, in.km.Offset, code, faults.n, err)
		}
		if transient {
			c.logFault(err, in, faults.n, 1)
		} else {
			c.o.Log.Error(err, "the parking table refused the message; trying again", "consumerGroup", c.s.group,
				"eventId", in.m.EventID, "topic", in.km.Topic, "partition", in.km.Partition, "offset", in.km.Offset,
				"attempt", refused, "source", "consumer database")
		}
		if err := sleep(ctx, c.retry.Delay(faults.n)); err != nil {
			return err
		}
	}
	if !fresh { // a redelivery of a parked message: counted and copied the first time
		c.o.Log.Info("redelivered message is already parked", "consumerGroup", c.s.group, "eventId", in.m.EventID,
			"topic", in.km.Topic, "partition", in.km.Partition, "offset", in.km.Offset)
		endSpan(in, Parked, cause)
		c.observe(in.m, Parked)
		return nil
	}
	c.o.Metrics.parked(c.s.group, in.km.Topic, in.m, code)
	c.o.Log.Info("message parked", "consumerGroup", c.s.group, "eventId", in.m.EventID, "code", code,
		"topic", in.km.Topic, "partition", in.km.Partition, "offset", in.km.Offset, "attempt", attempts,
		"error", cause.Error())
	if c.o.HoldAggregateOnPark && in.m.AggregateID != "" {
		c.mu.Lock()
		c.held[aggKey{in.m.AggregateType, in.m.AggregateID}] = true
		c.mu.Unlock()
	}
	c.deadLetter(ctx, in, code)
	endSpan(in, Parked, cause)
	c.observe(in.m, Parked)
	return nil
}

// deadLetter copies a parked message to the dead-letter topic, best effort: the
// parked row is the record, and a dead-letter topic that is down must not stop the
// partition.
func (c *Consumer) deadLetter(ctx context.Context, in incoming, code string) {
	if c.o.DeadLetter == nil {
		return
	}
	hs := append([]kafka.Header(nil), in.km.Headers...)
	hs = append(hs,
		kafka.Header{Key: "dlq_error_code", Value: []byte(code)},
		kafka.Header{Key: "dlq_source", Value: []byte(in.km.Topic + "/" + strconv.Itoa(in.km.Partition) + "/" + strconv.FormatInt(in.km.Offset, 10))},
		kafka.Header{Key: "dlq_consumer_group", Value: []byte(c.s.group)})
	err := c.o.DeadLetter.WriteMessages(ctx, kafka.Message{Topic: c.o.DeadLetterTopic, Key: in.km.Key, Value: in.km.Value, Headers: hs})
	if err != nil {
		c.o.Log.Error(err, "could not copy a parked message to the dead-letter topic; it stays parked",
			"consumerGroup", c.s.group, "eventId", in.m.EventID, "topic", c.o.DeadLetterTopic)
	}
}

// loadHeld reads the aggregates that already have a parked message.
// The lock is held across the query: a park that committed during it would otherwise
// be lost when the new set replaces the old one. heldAt moves even when the query
// fails, so a database that is down costs one query per heldRefresh, not per message.
func (c *Consumer) loadHeld(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.heldAt = time.Now()
	held, err := c.s.openAggregates(ctx)
	if err != nil {
		return err
	}
	c.held = held
	return nil
}

// heldRefresh is how often a holding consumer rereads the parked aggregates, so a
// Replay run elsewhere releases an aggregate within this long.
const heldRefresh = 10 * time.Second

func (c *Consumer) refreshHeld(ctx context.Context) {
	if !c.o.HoldAggregateOnPark {
		return
	}
	c.mu.Lock()
	fresh := time.Since(c.heldAt) < heldRefresh
	c.mu.Unlock()
	if fresh {
		return
	}
	if err := c.loadHeld(ctx); err != nil {
		c.o.Log.Error(err, "could not reread parked aggregates; keeping the last list", "consumerGroup", c.s.group)
	}
}

// isHeld reports whether m's aggregate has a parked predecessor (HoldAggregateOnPark).
func (c *Consumer) isHeld(m Message) bool {
	if !c.o.HoldAggregateOnPark || m.AggregateID == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[aggKey{m.AggregateType, m.AggregateID}]
}

func (c *Consumer) observe(m Message, o Outcome) {
	if c.o.Observe != nil {
		c.o.Observe(m, o)
	}
}
