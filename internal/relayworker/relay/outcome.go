// outcome.go: what to mark for each row of a published batch (sent, retry, dead,
// release), decided by the error class of its publish result (publish.Classify).

package relay

import (
	"errors"
	"fmt"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/backoff"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
)

// outcome is a batch's marks, written by the mark loop under the batch's token.
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
	// answered: a broker answered for at least one message (stored it, or refused it for
	// the message's own sake: unknown topic, too large, ...). A paused worker resumes
	// on such a trial (claim.go).
	answered bool
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

// classify records one message's outcome. release: the failure is the worker's, not
// the row's (shutdown, or the brokers are down): a transient or unknown failure hands
// the row back as it was, without an attempt and without a backoff.
func (r *Relay) classify(row *event.Row, res publish.Result, out *outcome, release bool) {
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
		out.topicMissing(row, code, msg, r.cfg.UnknownTopicGrace, r.cfg.Backoff)
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

// topicMissing records a missing topic: RETRY without an attempt inside the grace
// (measured from created_at on the database clock), DEAD once it passed. The wait grows
// with the row's age, not its attempts: waiting for a topic must not use up the attempt
// budget a later broker outage may need.
func (o *outcome) topicMissing(row *event.Row, code, msg string, grace time.Duration, bo backoff.Policy) {
	if row.Age >= grace {
		o.dead = append(o.dead, store.Failure{EventID: row.EventID, Code: code,
			Message: fmt.Sprintf("topic %q does not exist (unknown-topic grace %s passed): %s", row.Destination, grace, msg)})
		return
	}
	delay := bo.ForAge(row.Age)
	if left := grace - row.Age; delay > left {
		delay = left + 10*time.Millisecond // come back right when the grace ends
	}
	o.retry = append(o.retry, store.Failure{EventID: row.EventID, Code: code, Message: msg, Delay: delay, Uncounted: true})
}
