// process.go: one claimed batch -> Kafka messages in per-aggregate order -> an outcome
// per row (sent, retry, dead, release), classified by error class.

package relay

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/relayworker/store"
)

type outcome struct {
	sent []store.Sent
	// retry includes missing-topic waits inside --unknown-topic-grace: those are
	// Uncounted, the grace and not --max-attempts bounds them.
	retry   []store.Failure
	dead    []store.Failure
	release []string
	dest    map[string]string // event id -> destination, for metric labels
	// brokerDown is the error code when the whole batch failed because no broker
	// stored anything (brokerWide): its rows were released without an attempt and the
	// worker pauses claiming.
	brokerDown string
	brokerErr  string // the first failure's text, for the log
}

// topics are the batch's destinations (what a paused worker probes).
func (o *outcome) topics() []string {
	seen := map[string]bool{}
	var ts []string
	for _, d := range o.dest {
		if !seen[d] {
			seen[d] = true
			ts = append(ts, d)
		}
	}
	return ts
}

// process publishes claimed rows and returns what to mark.
func (r *Relay) process(work context.Context, rows []store.Row, deadline time.Time) outcome {
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
	// Per-aggregate order: publish in (aggregate, version) order; several versions of
	// one aggregate go out together only when they share topic and key (one partition,
	// one produce request). Otherwise only the oldest is published now.
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := &rows[i], &rows[j]
		if a.AggregateType != b.AggregateType {
			return a.AggregateType < b.AggregateType
		}
		if a.AggregateID != b.AggregateID {
			return a.AggregateID < b.AggregateID
		}
		return a.AggregateVersion < b.AggregateVersion
	})
	msgs := make([]kafka.Message, 0, len(rows))
	idx := make([]int, 0, len(rows))
	// prevHeld: rows[i-1] was released by the order guard, so its successors in the
	// same aggregate must wait too. Only the direct predecessor matters: rows are
	// sorted, and a held row holds every later version of its aggregate in turn.
	prevHeld := false
	for i := range rows {
		row := &rows[i]
		if i > 0 {
			prev := &rows[i-1]
			if prev.AggregateType == row.AggregateType && prev.AggregateID == row.AggregateID &&
				(prev.Destination != row.Destination || prev.MessageKey != row.MessageKey || prevHeld) {
				out.release = append(out.release, row.EventID)
				prevHeld = true
				continue
			}
		}
		prevHeld = false
		msg, err := publish.Message(row)
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

	if len(msgs) > 0 {
		if time.Until(deadline) <= 0 {
			// Lease guard: the claim itself took so long (pause, overload) that the lease
			// is nearly over; publishing now could race a take-over. Hand them back.
			for _, i := range idx {
				out.release = append(out.release, rows[i].EventID)
			}
			r.log.Info("lease nearly expired before publishing; releasing batch", "rows", len(idx))
		} else {
			pubCtx, cancel := context.WithDeadline(work, deadline)
			t0 := time.Now()
			results := r.pub.Publish(pubCtx, msgs)
			cancel()
			r.m.PublishLatency.Observe(time.Since(t0).Seconds())
			shutdown := work.Err() != nil
			down, code, msg := brokerWide(results)
			if down && !shutdown && r.brokersAnswer(work, &out) {
				down = false // the brokers are fine: these partitions failed, a per-row matter
			}
			if down {
				out.brokerDown, out.brokerErr = code, msg
			}
			for k, res := range results {
				r.classify(&rows[idx[k]], res, &out, shutdown || down)
			}
		}
	}
	return out
}

// classify records one message's outcome. release: the failure is the worker's, not
// the row's (shutdown, or the brokers are down): a transient or unknown failure hands
// the row back as it was, without an attempt and without a backoff.
func (r *Relay) classify(row *store.Row, res publish.Result, out *outcome, release bool) {
	if res.Err == nil {
		out.sent = append(out.sent, store.Sent{EventID: row.EventID, Partition: res.Partition, Offset: res.Offset})
		return
	}
	if errors.Is(res.Err, publish.ErrNotSent) {
		// Held back behind a failed older write: never sent, so no attempt is counted.
		out.release = append(out.release, row.EventID)
		return
	}
	class, code := publish.Classify(res.Err)
	msg := res.Err.Error()
	attempt := row.RetryCount + 1
	switch class {
	case publish.Permanent:
		out.dead = append(out.dead, store.Failure{EventID: row.EventID, Code: code, Message: msg})
		r.log.Info("permanent publish failure; event is DEAD", "eventId", row.EventID, "attempt", attempt, "code", code)
		return
	case publish.TopicMissing:
		if row.Age >= r.cfg.UnknownTopicGrace {
			out.dead = append(out.dead, store.Failure{EventID: row.EventID, Code: code,
				Message: fmt.Sprintf("topic %q does not exist (unknown-topic grace %s passed): %s", row.Destination, r.cfg.UnknownTopicGrace, msg)})
			return
		}
		// The wait grows with the row's age, not its attempts: waiting for a topic must
		// not use up the attempt budget a later broker outage may need.
		delay := r.cfg.Backoff.ForAge(row.Age)
		if left := r.cfg.UnknownTopicGrace - row.Age; delay > left {
			delay = left + 10*time.Millisecond // come back right when the grace ends
		}
		out.retry = append(out.retry, store.Failure{EventID: row.EventID, Code: code, Message: msg, Delay: delay, Uncounted: true})
		return
	case publish.Unknown:
		r.m.SendUnknown.WithLabelValues(row.Destination).Inc()
	}
	if release {
		// Abandoned at shutdown, or the brokers are down: hand the row back for an
		// immediate re-send (a duplicate is possible after an unknown outcome, and
		// allowed) instead of counting an attempt and a backoff against it.
		out.release = append(out.release, row.EventID)
		return
	}
	out.retry = append(out.retry, store.Failure{EventID: row.EventID, Code: code, Message: msg,
		Delay: r.cfg.Backoff.Delay(attempt)})
}
