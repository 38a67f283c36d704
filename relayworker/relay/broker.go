// broker.go: broker-wide failures are the worker's state, not the rows' attempts.
// When a batch fails because no broker stored anything, the worker releases the batch
// (no attempt counted, no backoff), stops claiming, probes the brokers with its own
// bounded backoff and resumes as soon as one answers.

package relay

import (
	"context"
	"errors"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/backoff"
	"github.com/outbox-operator/outbox-operator/relayworker/publish"
)

// BrokerProbe is how long a paused worker waits between broker probes: 200 ms at
// first, doubling (with jitter) to at most 2 s, so it resumes within about two seconds
// of the brokers' return however long the outage was. A probe is one connection and a
// metadata request: cheap enough to repeat every second or two for hours.
var BrokerProbe = backoff.Policy{Min: 200 * time.Millisecond, Max: 2 * time.Second}

// Prober checks whether the brokers answer for topics (*publish.Publisher does).
type Prober interface {
	Probe(ctx context.Context, topics []string) error
}

// Resetter drops pooled broker connections after an outage (*publish.Publisher does).
type Resetter interface {
	ResetConnections()
}

// brokerWide reports whether results may say the brokers, not the messages, failed:
// nothing was stored, at least one message failed with a transient or unknown-outcome
// error, and no broker answered "unknown topic" (an answer from a broker). Permanent,
// per-message failures (too large, invalid) neither count for nor against it. A
// partition-level error while other messages were stored is the rows' own failure.
// The caller confirms with a probe (brokersAnswer) before pausing.
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

// brokersAnswer probes the brokers after a batch that stored nothing: if they answer
// with leaders for every partition of the batch's topics, the failure belongs to the
// partitions or topics (one topic's partitions refusing writes while the rest of the
// cluster works), and the rows back off on their own. Without a prober it says no.
func (r *Relay) brokersAnswer(ctx context.Context, out *outcome) bool {
	if r.probe == nil {
		return false
	}
	c, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return r.probe.Probe(c, out.topics()) == nil
}

// brokerState is what the worker reports about the brokers (worker-status table,
// readiness, outbox_broker_up).
type brokerState struct {
	up     bool
	code   string
	since  time.Time
	streak int // pauses since the last batch that stored something
}

// pauseForBroker stops claiming until the brokers answer again: probes with
// BrokerProbe's backoff (continuing from earlier pauses while no batch has stored
// anything in between, so a flapping broker is probed less and less often, up to the
// cap), then resumes. The paused batch was already handed to the marks as released.
func (r *Relay) pauseForBroker(ctx context.Context, topics []string, code, msg string) {
	r.setBroker(ctx, false, code, msg)
	for n := r.broker().streak; ctx.Err() == nil; n++ {
		sleep(ctx, BrokerProbe.Delay(n))
		r.health.Beat() // paused, not stalled: liveness stays green
		if ctx.Err() != nil {
			return
		}
		if r.probe == nil {
			break // no prober: the next claim's produce is the probe
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := r.probe.Probe(pctx, topics)
		cancel()
		if err == nil {
			break
		}
		r.log.V(1).Info("broker probe failed", "error", err.Error())
	}
	if ctx.Err() != nil {
		return
	}
	if r.reset != nil {
		r.reset.ResetConnections()
	}
	r.setBroker(ctx, true, "", "")
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n, err := r.store.ReleaseBrokerRetries(c, publish.BrokerCodes); err != nil {
		r.m.Errors.WithLabelValues("mark").Inc()
		r.log.Error(err, "could not release broker-caused retries; they wait out their backoff")
	} else if n > 0 {
		r.log.Info("released rows backed off by the outage", "rows", n)
	}
}

// setBroker records a transition (logged once per transition, not per probe). A pause
// always ends up again (or with the stop signal), so every pause is a transition.
func (r *Relay) setBroker(ctx context.Context, up bool, code, msg string) {
	r.bmu.Lock()
	was := r.bstate
	r.bstate.up, r.bstate.code = up, code
	if !up {
		r.bstate.streak++
		if was.up {
			r.bstate.since = time.Now()
		}
	}
	st := r.bstate
	r.bmu.Unlock()
	switch {
	case !up && was.up:
		r.m.BrokerUp.Set(0)
		r.m.BrokerPauses.Inc()
		r.health.SetReady(false, "broker unavailable ("+code+"): claims paused")
		r.log.Info("no broker stores anything; pausing claims (rows keep their attempts)", "code", code, "error", msg)
	case up && !was.up:
		r.m.BrokerUp.Set(1)
		r.health.SetReady(true, "")
		r.log.Info("brokers answer again; resuming claims", "code", was.code, "paused", time.Since(st.since).Round(time.Millisecond).String())
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
