// broker.go: broker-wide failures are the worker's state, not the rows' attempts.
// When a batch fails because no broker stored anything, the worker releases the batch
// (no attempt counted, no backoff) and pauses: it stops claiming, waits with its own
// bounded backoff (probing the brokers' metadata while it waits), then sends the next
// batch once as a trial. Only a trial the brokers do not refuse as a whole resumes it;
// metadata alone never does, because brokers in maintenance answer metadata with
// leaders for every partition while refusing every write (NOT_ENOUGH_REPLICAS).

package relay

import (
	"context"
	"errors"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/backoff"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
)

// BrokerProbe is how long a paused worker waits before each trial: 200 ms at first,
// doubling (with jitter) to at most 2 s, so it resumes within about two seconds of the
// brokers' return however long the outage was. While the metadata probe fails the wait
// goes on without a trial: a probe is one connection and a metadata request, cheap
// enough to repeat every second or two for hours; a trial claims a batch.
var BrokerProbe = backoff.Policy{Min: 200 * time.Millisecond, Max: 2 * time.Second}

// Prober checks whether the brokers answer for topics (*publish.Publisher does).
type Prober interface {
	Probe(ctx context.Context, topics []string) error
}

// Resetter drops pooled broker connections after an outage (*publish.Publisher does).
type Resetter interface {
	ResetConnections()
}

// Pause causes, the `cause` key of the pause log line.
const (
	// CauseProbeFailed: the metadata probe failed too (no broker answers, or a
	// partition has no leader).
	CauseProbeFailed = "probe-failed"
	// CauseProduceRefused: the brokers answer metadata with leaders for every
	// partition, but refused every write of the batch (NOT_ENOUGH_REPLICAS under
	// acks=all during a maintenance, REQUEST_TIMED_OUT, ...).
	CauseProduceRefused = "produce-refused"
)

// brokerWide reports whether results say the brokers, not the messages, failed:
// nothing was stored, at least one message failed with a transient or unknown-outcome
// error, and no broker answered "unknown topic" (an answer from a broker). Permanent,
// per-message failures (too large, invalid) neither count for nor against it. A
// partition-level error while other messages were stored is the rows' own failure.
func brokerWide(results []publish.Result) (down bool, code, msg string) {
	for _, res := range results {
		if res.Err == nil {
			return false, "", ""
		}
		if errors.Is(res.Err, publish.ErrNotSent) {
			continue
		}
		switch class, c := publish.Classify(res.Err); class {
		case publish.Transient, publish.Unknown:
			if code == "" {
				code, msg = c, res.Err.Error()
			}
		case publish.TopicMissing:
			return false, "", ""
		}
	}
	return code != "", code, msg
}

// answered reports whether a broker answered for at least one message: stored it,
// or refused it for the message's own sake (unknown topic, too large, invalid). A
// message too large to send at all never reached a broker.
func answered(results []publish.Result) bool {
	for _, res := range results {
		if res.Err == nil {
			return true
		}
		var local kafka.MessageTooLargeError
		if errors.As(res.Err, &local) || errors.Is(res.Err, publish.ErrNotSent) {
			continue
		}
		if class, _ := publish.Classify(res.Err); class == publish.Permanent || class == publish.TopicMissing {
			return true
		}
	}
	return false
}

// brokerState is what the worker reports about the brokers (worker-status table,
// readiness, outbox_broker_up).
type brokerState struct {
	up     bool
	code   string
	since  time.Time
	streak int // pauses since the last batch that stored something
}

// pauseForBroker stops claiming after a batch the brokers refused as a whole: it
// records the pause (on the way in: probes once to tell the cause), waits
// BrokerProbe's backoff (continuing from earlier pauses while no batch has stored
// anything in between, so a flapping broker is tried less and less often, up to the
// cap) until the metadata probe answers, and returns for the trial batch. The worker
// stays paused (not ready, outbox_broker_up 0) until resumeFromBroker. The refused
// batch was already handed to the marks as released.
func (r *Relay) pauseForBroker(ctx context.Context, topics []string, code, msg string) {
	if r.broker().up {
		cause, perr := r.pauseCause(ctx, topics)
		r.setBroker(ctx, false, code)
		kv := []any{"cause", cause, "code", code, "error", msg}
		if perr != "" {
			kv = append(kv, "probeError", perr)
		}
		r.log.Info("brokers store nothing; pausing claims (rows keep their attempts)", kv...)
	} else {
		r.setBroker(ctx, false, code)
		r.log.V(1).Info("trial batch refused; staying paused", "code", code, "error", msg)
	}
	for n := r.broker().streak; ctx.Err() == nil; n++ {
		sleep(ctx, BrokerProbe.Delay(n))
		r.health.Beat() // paused, not stalled: liveness stays green
		if ctx.Err() != nil || r.probe == nil {
			break // without a prober the trial produce is the probe
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := r.probe.Probe(pctx, topics)
		cancel()
		if err == nil {
			break
		}
		r.log.V(1).Info("broker probe failed", "error", err.Error())
	}
	if ctx.Err() == nil && r.reset != nil {
		r.reset.ResetConnections() // the trial dials afresh
	}
}

// pauseCause probes once: a failed probe means the brokers cannot be reached (or a
// partition has no leader); a probe that answers means they refuse the writes.
func (r *Relay) pauseCause(ctx context.Context, topics []string) (cause, probeErr string) {
	if r.probe == nil {
		return CauseProduceRefused, "no prober"
	}
	c, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := r.probe.Probe(c, topics); err != nil {
		return CauseProbeFailed, err.Error()
	}
	return CauseProduceRefused, ""
}

// resumeFromBroker ends a pause once a trial batch was not refused as a whole (how
// says why: a produce stored something, or the trial had nothing to send) and makes
// the rows this worker parked at the outage's start claimable (parked.go).
func (r *Relay) resumeFromBroker(ctx context.Context, how string) {
	was := r.broker()
	r.setBroker(ctx, true, "")
	r.log.Info("brokers store again; resuming claims", "code", was.code, "resumedBy", how,
		"paused", time.Since(was.since).Round(time.Millisecond).String())
	r.releaseParked()
}

// setBroker records a transition. The log lines are the callers': the way in says
// why, the way out how long.
func (r *Relay) setBroker(ctx context.Context, up bool, code string) {
	r.bmu.Lock()
	was := r.bstate
	r.bstate.up, r.bstate.code = up, code
	if !up {
		r.bstate.streak++
		if was.up {
			r.bstate.since = time.Now()
		}
	}
	r.bmu.Unlock()
	switch {
	case !up && was.up:
		r.m.BrokerUp.Set(0)
		r.m.BrokerPauses.Inc()
		r.health.SetReady(false, "broker unavailable ("+code+"): claims paused")
	case up && !was.up:
		r.m.BrokerUp.Set(1)
		r.health.SetReady(true, "")
	}
	r.reportWorker(ctx)
}

// publishedOK resets the pause streak: the brokers stored something.
func (r *Relay) publishedOK() {
	r.bmu.Lock()
	r.bstate.streak = 0
	r.bmu.Unlock()
}

func (r *Relay) broker() brokerState {
	r.bmu.Lock()
	defer r.bmu.Unlock()
	return r.bstate
}
