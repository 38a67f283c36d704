// holdplan.go: the hold table's transitions, pure. PlanHolds decides which events of
// a published batch go to the hold table (and as what); Transition decides what a
// hold row becomes after the relay tried it again. The rules are v1's (max attempts,
// DEAD does not block later versions) with the state in the hold table: a RETRY row
// holds back every newer version of its aggregate (as HELD rows) until it is sent or
// goes DEAD.

package shardstore

import (
	"time"

	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// Outcome is what happened to one event the relay meant to publish.
type Outcome int

const (
	// Sent: the broker stored it.
	Sent Outcome = iota
	// Failed: a retriable failure; it counts an attempt.
	Failed
	// Unsent: not tried (the publish stopped before it, or the broker-wide pause):
	// retried without counting an attempt.
	Unsent
	// Rejected: retrying cannot help; DEAD now.
	Rejected
)

// Result is one event's outcome and, for a failure, why and when to retry.
type Result struct {
	Outcome Outcome
	Code    string
	Message string
	// RetryIn is the backoff before the next attempt (Failed, Unsent).
	RetryIn time.Duration
}

// CodeMaxAttempts is the code of a row that went DEAD because it failed maxAttempts
// times (v1's code); the message keeps the last failure's code.
const CodeMaxAttempts = "MAX_ATTEMPTS"

// PlanHolds decides the hold rows of a batch: events[i] had results[i] (a Held event
// is never published: its result is ignored unless Sent). Per aggregate, in the
// batch's order (seq order, so version order for serialised writers):
//   - a Held event, or one behind a RETRY or HELD version of its aggregate earlier
//     in the batch, becomes HELD unless it was Sent (already published; holding it
//     would only publish it twice);
//   - Failed becomes RETRY with one attempt, or DEAD (MAX_ATTEMPTS) when maxAttempts
//     is 1; Unsent becomes RETRY with no attempt; both hold back what follows;
//   - Rejected becomes DEAD and holds nothing back.
func PlanHolds(events []Event, results []Result, maxAttempts int) []Hold {
	var holds []Hold
	blocked := map[AggregateKey]bool{}
	for i := range events {
		e, r := &events[i], results[i]
		k := e.Key()
		if r.Outcome == Sent {
			continue
		}
		if e.Held || blocked[k] {
			holds = append(holds, Hold{EventID: e.EventID, State: schema.StatusHeld})
			blocked[k] = true
			continue
		}
		switch r.Outcome {
		case Failed:
			h := retry(e.EventID, 0, r, maxAttempts)
			blocked[k] = h.State == schema.StatusRetry
			holds = append(holds, h)
		case Unsent:
			holds = append(holds, Hold{EventID: e.EventID, State: schema.StatusRetry, RetryIn: r.RetryIn, Code: r.Code, Message: r.Message})
			blocked[k] = true
		case Rejected:
			holds = append(holds, Hold{EventID: e.EventID, State: schema.StatusDead, Code: r.Code, Message: r.Message})
		}
	}
	return holds
}

// retry is a counted failure after attempts earlier ones: RETRY, or DEAD once it
// reaches maxAttempts.
func retry(id string, attempts int, r Result, maxAttempts int) Hold {
	if attempts+1 >= maxAttempts {
		return Hold{EventID: id, State: schema.StatusDead, Attempts: attempts + 1, Code: CodeMaxAttempts, Message: r.Code + ": " + r.Message}
	}
	return Hold{EventID: id, State: schema.StatusRetry, Attempts: attempts + 1, RetryIn: r.RetryIn, Code: r.Code, Message: r.Message}
}

// Transition decides what a due hold row becomes after the relay tried it with
// result r; ok is false when nothing changes (a HELD row that was not tried stays
// HELD). Sent deletes the row (which makes the HELD rows behind a RETRY due); Failed
// counts an attempt (RETRY, or DEAD at maxAttempts: a HELD row that fails becomes a
// RETRY that now holds back the newer ones); Unsent reschedules a RETRY without
// counting; Rejected is DEAD.
func Transition(row HoldRow, r Result, maxAttempts int) (s Settlement, ok bool) {
	s = Settlement{EventID: row.EventID, Token: row.Token}
	switch r.Outcome {
	case Sent:
		s.Delete = true
	case Failed:
		h := retry(row.EventID, row.Attempts, r, maxAttempts)
		s.State, s.CountAttempt, s.RetryIn, s.Code, s.Message = h.State, true, h.RetryIn, h.Code, h.Message
	case Unsent:
		if row.State != schema.StatusRetry {
			return Settlement{}, false
		}
		s.State, s.RetryIn, s.Code, s.Message = schema.StatusRetry, r.RetryIn, r.Code, r.Message
	case Rejected:
		s.State, s.Code, s.Message = schema.StatusDead, r.Code, r.Message
	}
	return s, true
}
