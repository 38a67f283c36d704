// broker.go: broker-wide failures are the worker's state, not the rows' attempts
// (internal/relayworker/brokerpause, shared with the v2 loop). When a batch fails
// because no broker stored anything, the worker releases the batch (no attempt
// counted, no backoff) and pauses: it stops claiming, waits with its own bounded
// backoff (probing the brokers' metadata while it waits), then sends the next batch
// once as a trial. Only a trial the brokers do not refuse as a whole resumes it.

package relay

import (
	"context"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/brokerpause"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
)

// Prober checks whether the brokers answer for topics (*publish.Publisher does).
type Prober = brokerpause.Prober

// Resetter drops pooled broker connections after an outage (*publish.Publisher does).
type Resetter = brokerpause.Resetter

// Pause causes, the `cause` key of the pause log line.
const (
	CauseProbeFailed    = brokerpause.CauseProbeFailed
	CauseProduceRefused = brokerpause.CauseProduceRefused
)

func brokerWide(results []publish.Result) (down bool, code, msg string) {
	return brokerpause.BrokerWide(results)
}

func answered(results []publish.Result) bool { return brokerpause.Answered(results) }

// pauseForBroker stops claiming after a batch the brokers refused as a whole
// (brokerpause.State.Pause). The refused batch was already handed to the marks as
// released.
func (r *Relay) pauseForBroker(ctx context.Context, topics []string, code, msg string) {
	r.brk.Pause(ctx, topics, code, msg)
}

// resumeFromBroker ends a pause once a trial batch was not refused as a whole (how
// says why: a produce stored something, or the trial had nothing to send) and makes
// the rows this worker parked at the outage's start claimable (parked.go).
func (r *Relay) resumeFromBroker(ctx context.Context, how string) {
	r.brk.Resume(ctx, how)
	r.releaseParked()
}

// publishedOK resets the pause streak: the brokers stored something.
func (r *Relay) publishedOK() { r.brk.Stored() }

func (r *Relay) broker() brokerpause.Snapshot { return r.brk.Get() }
