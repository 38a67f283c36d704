// Package brokerpause is a relay worker's broker-wide pause, shared by both relay
// loops (docs/worker-contract.md, "Broker-wide failures pause the worker"). When a
// batch fails because no broker stored anything (BrokerWide), the loop hands the batch
// back as it was (no attempt counted, no backoff) and Pauses: it stops reading, waits
// with its own bounded backoff (probing the brokers' metadata while it waits), then
// sends the next batch once as a trial. Only a trial the brokers do not refuse as a
// whole Resumes it; metadata alone never does, because brokers in maintenance answer
// metadata with leaders for every partition while refusing every write
// (NOT_ENOUGH_REPLICAS).
package brokerpause

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/backoff"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/health"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/metrics"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/startstop"
)

// Probe is how long a paused worker waits before each trial: 200 ms at first,
// doubling (with jitter) to at most 2 s, so it resumes within about two seconds of the
// brokers' return however long the outage was. While the metadata probe fails the wait
// goes on without a trial: a probe is one connection and a metadata request, cheap
// enough to repeat every second or two for hours; a trial reads a batch.
var Probe = backoff.Policy{Min: 200 * time.Millisecond, Max: 2 * time.Second}

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

// BrokerWide reports whether results say the brokers, not the messages, failed:
// nothing was stored, at least one message failed with a transient or unknown-outcome
// error, and no broker answered "unknown topic" (an answer from a broker). Permanent,
// per-message failures (too large, invalid) neither count for nor against it. A
// partition-level error while other messages were stored is the rows' own failure.
func BrokerWide(results []publish.Result) (down bool, code, msg string) {
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

// Answered reports whether a broker answered for at least one message: stored it,
// or refused it for the message's own sake (unknown topic, too large, invalid). A
// message too large to send at all never reached a broker.
func Answered(results []publish.Result) bool {
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

// Snapshot is what the worker reports about the brokers (worker-status table,
// readiness, outbox_broker_up).
type Snapshot struct {
	Up     bool
	Code   string
	Since  time.Time // start of the ongoing pause
	Streak int       // pauses since the last batch that stored something
}

// Options wire a State to its worker.
type Options struct {
	Metrics *metrics.Metrics
	Health  *health.State
	Log     logr.Logger
	// Prober and Resetter are the publisher's (nil: the trial follows one wait,
	// unprobed; nothing to reset).
	Prober   Prober
	Resetter Resetter
	// Report writes the worker's status row after every transition (nil: none).
	Report func(ctx context.Context)
	// Waited runs after every wait of a pause (nil: none): a paused worker is not
	// stalled (liveness beats), and the v2 loop keeps its shard leases.
	Waited func(ctx context.Context)
}

// State is one worker's broker state. Pause, Resume and Stored are the loop's; Get
// may be called from anywhere.
type State struct {
	o  Options
	mu sync.Mutex
	st Snapshot
}

// New is a State with the brokers up.
func New(o Options) *State { return &State{o: o, st: Snapshot{Up: true}} }

// Get is the current state.
func (s *State) Get() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// Up reports whether the worker is not paused.
func (s *State) Up() bool { return s.Get().Up }

// Pause stops reading after a batch the brokers refused as a whole: it records the
// pause (on the way in: probes once to tell the cause), waits Probe's backoff
// (continuing from earlier pauses while no batch has stored anything in between, so a
// flapping broker is tried less and less often, up to the cap) until the metadata
// probe answers, and returns for the trial batch. The worker stays paused (not ready,
// outbox_broker_up 0) until Resume. The refused batch is the caller's to hand back.
func (s *State) Pause(ctx context.Context, topics []string, code, msg string) {
	if s.Up() {
		cause, perr := s.cause(ctx, topics)
		s.set(ctx, false, code)
		kv := []any{"cause", cause, "code", code, "error", msg}
		if perr != "" {
			kv = append(kv, "probeError", perr)
		}
		s.o.Log.Info("brokers store nothing; pausing claims (rows keep their attempts)", kv...)
	} else {
		s.set(ctx, false, code)
		s.o.Log.V(1).Info("trial batch refused; staying paused", "code", code, "error", msg)
	}
	for n := s.Get().Streak; ctx.Err() == nil; n++ {
		startstop.Sleep(ctx, Probe.Delay(n))
		s.o.Health.Beat() // paused, not stalled: liveness stays green
		if s.o.Waited != nil && ctx.Err() == nil {
			s.o.Waited(ctx)
		}
		if ctx.Err() != nil || s.o.Prober == nil {
			break // without a prober the trial produce is the probe
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.o.Prober.Probe(pctx, topics)
		cancel()
		if err == nil {
			break
		}
		s.o.Log.V(1).Info("broker probe failed", "error", err.Error())
	}
	if ctx.Err() == nil && s.o.Resetter != nil {
		s.o.Resetter.ResetConnections() // the trial dials afresh
	}
}

// cause probes once: a failed probe means the brokers cannot be reached (or a
// partition has no leader); a probe that answers means they refuse the writes.
func (s *State) cause(ctx context.Context, topics []string) (cause, probeErr string) {
	if s.o.Prober == nil {
		return CauseProduceRefused, "no prober"
	}
	c, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := s.o.Prober.Probe(c, topics); err != nil {
		return CauseProbeFailed, err.Error()
	}
	return CauseProduceRefused, ""
}

// Resume ends a pause once a trial batch was not refused as a whole; how says why
// (`resumedBy`: produce, broker answer, nothing to send).
func (s *State) Resume(ctx context.Context, how string) {
	was := s.Get()
	s.set(ctx, true, "")
	s.o.Log.Info("brokers store again; resuming claims", "code", was.Code, "resumedBy", how,
		"paused", time.Since(was.Since).Round(time.Millisecond).String())
}

// set records a transition. The log lines are the callers': the way in says why, the
// way out how long.
func (s *State) set(ctx context.Context, up bool, code string) {
	s.mu.Lock()
	was := s.st
	s.st.Up, s.st.Code = up, code
	if !up {
		s.st.Streak++
		if was.Up {
			s.st.Since = time.Now()
		}
	}
	s.mu.Unlock()
	switch {
	case !up && was.Up:
		s.o.Metrics.BrokerUp.Set(0)
		s.o.Metrics.BrokerPauses.Inc()
		s.o.Health.SetReady(false, "broker unavailable ("+code+"): claims paused")
	case up && !was.Up:
		s.o.Metrics.BrokerUp.Set(1)
		s.o.Health.SetReady(true, "")
	}
	if s.o.Report != nil {
		s.o.Report(ctx)
	}
}

// Stored resets the pause streak: the brokers stored something.
func (s *State) Stored() {
	s.mu.Lock()
	s.st.Streak = 0
	s.mu.Unlock()
}
