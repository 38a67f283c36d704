// publish.go: the publish stage. One claimed batch -> Kafka messages in per-aggregate
// order -> an outcome per row (outcome.go), within the batch's lease.

package relay

import (
	"context"
	"errors"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
)

// published is a batch whose publish finished and whose marks are still to be written.
type published struct {
	token string
	out   outcome
	after func() // called once the marks are written (the feed's done), or nil
}

// publish publishes a claimed batch and returns what to mark (nil when nothing was
// claimed).
func (r *Relay) publish(work context.Context, c claimed) *published {
	if c.err != nil || len(c.rows) == 0 {
		c.finish()
		return nil
	}
	// The lease started at the latest when the claim returned... and at the earliest
	// when we sent it; measuring from `start` is the conservative side.
	deadline := c.start.Add(r.cfg.Lease - r.cfg.LeaseMargin)
	return &published{token: c.token, out: r.process(work, c.rows, deadline), after: c.after}
}

// process publishes claimed rows and returns what to mark.
func (r *Relay) process(work context.Context, rows []event.Row, deadline time.Time) outcome {
	out := r.newOutcome(rows)
	now, held := orderGuard(rows)
	for _, i := range held {
		out.release = append(out.release, rows[i].EventID)
	}
	msgs, idx := messages(r.cfg.Format, rows, now, &out)
	if len(msgs) == 0 {
		return out
	}
	if time.Until(deadline) <= 0 {
		// Lease guard: the claim itself took so long (pause, overload) that the lease
		// is nearly over; publishing now could race a take-over. Hand them back.
		for _, i := range idx {
			out.release = append(out.release, rows[i].EventID)
		}
		r.log.Info("lease nearly expired before publishing; releasing batch", "rows", len(idx))
		return out
	}
	r.send(work, rows, msgs, idx, deadline, &out)
	return out
}

// newOutcome starts a batch's outcome: each row's destination for the metric labels,
// and the count of leases taken over from expired SENDING rows.
func (r *Relay) newOutcome(rows []event.Row) outcome {
	out := outcome{dest: make(map[string]string, len(rows))}
	expired := 0
	for i := range rows {
		out.dest[rows[i].EventID] = rows[i].Destination
		if rows[i].Expired {
			expired++
		}
	}
	if expired > 0 {
		r.m.LeaseExpired.Add(float64(expired))
		r.log.Info("took over expired leases", "rows", expired)
	}
	return out
}

// messages maps rows[now...] to Kafka messages in format f; idx[k] is the row of msgs[k]. A row
// whose data cannot become a message (bad headers, no destination, ...) goes DEAD
// without anything being sent, and does not hold back its successors.
func messages(f publish.Format, rows []event.Row, now []int, out *outcome) (msgs []kafka.Message, idx []int) {
	msgs = make([]kafka.Message, 0, len(now))
	idx = make([]int, 0, len(now))
	for _, i := range now {
		row := &rows[i]
		msg, err := f.Message(row)
		if err != nil {
			var bad *publish.BadEventError
			if errors.As(err, &bad) {
				out.dead = append(out.dead, store.Failure{EventID: row.EventID, Code: bad.Code, Message: bad.Msg})
				continue
			}
			out.dead = append(out.dead, store.Failure{EventID: row.EventID, Code: publish.CodeInvalidPayload, Message: err.Error()})
			continue
		}
		msgs = append(msgs, msg)
		idx = append(idx, i)
	}
	return msgs, idx
}

// send publishes msgs before the lease deadline and classifies each result. A batch
// the brokers refused as a whole is released and pauses the worker (broker.go).
func (r *Relay) send(work context.Context, rows []event.Row, msgs []kafka.Message, idx []int, deadline time.Time, out *outcome) {
	pubCtx, cancel := context.WithDeadline(work, deadline)
	pubCtx, span := startBatchSpan(pubCtx, msgs)
	t0 := time.Now()
	results := r.pub.Publish(pubCtx, msgs)
	cancel()
	endBatchSpan(span, results)
	r.m.PublishLatency.Observe(time.Since(t0).Seconds())
	shutdown := work.Err() != nil
	down, code, msg := brokerWide(results)
	out.answered = answered(results)
	if down && !shutdown { // a publish cut short by the stop signal says nothing about the brokers
		out.brokerDown, out.brokerErr = code, msg
	}
	for k, res := range results {
		r.classify(&rows[idx[k]], res, out, shutdown || down)
	}
}
