// Package verdict decides what one published message's result means for its event,
// the same way for both relay loops: v1 turns a Verdict into a mark of the row
// (SENT, RETRY, DEAD, release), v2 into a hold-table decision (shardstore.Result).
// The rules are docs/worker-contract.md's: publish.Classify's classes, retries with
// the row's own backoff, a missing topic retried without an attempt for the
// unknown-topic grace (measured from created_at on the database clock), and a
// failure that is the worker's (shutdown, the brokers down) handed back as it was.
package verdict

import (
	"errors"
	"fmt"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/backoff"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
)

// Kind is what happens to the event.
type Kind int

const (
	// Sent: the broker stored it.
	Sent Kind = iota
	// Retry: try again after Delay; an attempt is counted unless Uncounted.
	Retry
	// Dead: retrying cannot help.
	Dead
	// Release: hand it back as it was, no attempt, no backoff (never sent because an
	// older write failed first, or the failure is the worker's: shutdown, brokers down).
	Release
)

// Verdict is one event's outcome.
type Verdict struct {
	Kind    Kind
	Code    string
	Message string
	// Delay is a Retry's backoff.
	Delay time.Duration
	// Uncounted: a Retry that does not count against --max-attempts (a missing topic
	// inside the grace: the grace bounds it, and its wait grows with the row's age).
	Uncounted bool
	// Class is publish.Classify's class of the error (meaningless for Sent and for a
	// message that was never sent). publish.Unknown outcomes are counted in
	// outbox_send_unknown_total by the caller; publish.Permanent is the DEAD the
	// caller logs as "permanent publish failure".
	Class publish.Class
	// Classified: Class was set (the message was sent and failed).
	Classified bool
}

// Decide is the verdict on row's publish result res. grace is --unknown-topic-grace,
// bo the rows' backoff (the attempt is row.RetryCount + 1); release says the failure
// is the worker's (shutdown, or the brokers refused the batch as a whole): a
// transient or unknown failure is then handed back without an attempt.
func Decide(row *event.Row, res publish.Result, grace time.Duration, bo backoff.Policy, release bool) Verdict {
	if res.Err == nil {
		return Verdict{Kind: Sent}
	}
	if errors.Is(res.Err, publish.ErrNotSent) {
		// Held back behind a failed older write: never sent, so no attempt is counted.
		return Verdict{Kind: Release}
	}
	class, code := publish.Classify(res.Err)
	v := Verdict{Code: code, Message: res.Err.Error(), Class: class, Classified: true}
	switch class {
	case publish.Permanent:
		v.Kind = Dead
		return v
	case publish.TopicMissing:
		return topicMissing(row, v, grace, bo)
	}
	if release {
		// Abandoned at shutdown, or the brokers are down: hand the row back for an
		// immediate re-send (a duplicate is possible after an unknown outcome, and
		// allowed) instead of counting an attempt and a backoff against it.
		v.Kind = Release
		return v
	}
	v.Kind, v.Delay = Retry, bo.Delay(row.RetryCount+1)
	return v
}

// topicMissing: RETRY without an attempt inside the grace (measured from created_at
// on the database clock), DEAD once it passed. The wait grows with the row's age, not
// its attempts: waiting for a topic must not use up the attempt budget a later
// broker outage may need.
func topicMissing(row *event.Row, v Verdict, grace time.Duration, bo backoff.Policy) Verdict {
	if row.Age >= grace {
		v.Kind = Dead
		v.Message = fmt.Sprintf("topic %q does not exist (unknown-topic grace %s passed): %s", row.Destination, grace, v.Message)
		return v
	}
	delay := bo.ForAge(row.Age)
	if left := grace - row.Age; delay > left {
		delay = left + 10*time.Millisecond // come back right when the grace ends
	}
	v.Kind, v.Delay, v.Uncounted = Retry, delay, true
	return v
}
