// outcome.go: what to mark for each row of a published batch (sent, retry, dead,
// release), decided by verdict.Decide (shared with the v2 loop).

package relay

import (
	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/verdict"
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

// classify records one message's outcome (verdict.Decide). release: the failure is
// the worker's, not the row's (shutdown, or the brokers are down): a transient or
// unknown failure hands the row back as it was, without an attempt and without a
// backoff.
func (r *Relay) classify(row *event.Row, res publish.Result, out *outcome, release bool) {
	v := verdict.Decide(row, res, r.cfg.UnknownTopicGrace, r.cfg.Backoff, release)
	if v.Classified && v.Class == publish.Unknown {
		r.m.SendUnknown.WithLabelValues(row.Destination).Inc()
	}
	switch v.Kind {
	case verdict.Sent:
		out.sent = append(out.sent, store.Sent{EventID: row.EventID, Partition: res.Partition, Offset: res.Offset})
	case verdict.Release:
		out.release = append(out.release, row.EventID)
	case verdict.Dead:
		out.dead = append(out.dead, store.Failure{EventID: row.EventID, Code: v.Code, Message: v.Message})
		if v.Class == publish.Permanent {
			r.log.Info("permanent publish failure; event is DEAD", "eventId", row.EventID, "attempt", row.RetryCount+1, "code", v.Code)
		}
	case verdict.Retry:
		out.retry = append(out.retry, store.Failure{EventID: row.EventID, Code: v.Code, Message: v.Message,
			Delay: v.Delay, Uncounted: v.Uncounted})
	}
}
