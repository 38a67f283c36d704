// mark.go: record a batch's outcome, every statement fenced by the owner token.

package relay

import (
	"context"
	"time"

	"github.com/outbox-operator/outbox-operator/relayworker/store"
)

func (r *Relay) mark(token string, out *outcome) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if len(out.sent) > 0 {
		n, err := r.store.MarkSent(ctx, token, out.sent)
		if err != nil {
			// Published but not marked: the lease expires and the rows are sent again
			// (a duplicate, never a loss).
			r.m.Errors.WithLabelValues("mark").Inc()
			r.log.Error(err, "mark SENT failed; rows will be re-published after the lease", "rows", len(out.sent))
		} else {
			if lost := int64(len(out.sent)) - n; lost > 0 {
				r.m.MarkFenced.Add(float64(lost))
				r.log.Info("lease lost before marking SENT; another worker owns the rows", "rows", lost)
			}
			counts := map[string]int{}
			for _, s := range out.sent {
				counts[out.dest[s.EventID]]++
			}
			for d, c := range counts {
				r.m.SendSuccess.WithLabelValues(d).Add(float64(c))
			}
		}
	}
	if len(out.retry) > 0 {
		n, err := r.markRetry(ctx, token, r.cfg.MaxAttempts, out.retry, out.dest)
		if err == nil {
			if lost := int64(len(out.retry)) - n; lost > 0 {
				r.m.MarkFenced.Add(float64(lost))
			}
		}
	}
	r.markDeadAndRelease(ctx, token, out)
}

func (r *Relay) markRetry(ctx context.Context, token string, maxAttempts int, fs []store.Failure, dest map[string]string) (int64, error) {
	deadIDs, n, err := r.store.MarkRetry(ctx, token, maxAttempts, fs)
	if err != nil {
		r.m.Errors.WithLabelValues("mark").Inc()
		r.log.Error(err, "mark RETRY failed", "rows", len(fs))
		return 0, err
	}
	dead := map[string]bool{}
	for _, id := range deadIDs {
		dead[id] = true
	}
	for _, f := range fs {
		if dead[f.EventID] {
			r.m.SendDead.WithLabelValues(dest[f.EventID], store.CodeMaxAttempts).Inc()
			r.log.Info("attempts used up; event is DEAD", "eventId", f.EventID, "code", f.Code)
		} else {
			r.m.SendRetry.WithLabelValues(dest[f.EventID], f.Code).Inc()
		}
	}
	// One line per failed batch (not per row), at the default level: a broker outage or
	// a wrong TLS/SASL setting must be visible without debug logs, and the backoff
	// bounds how often this line repeats.
	r.log.Info("publish failed; scheduled retry", "rows", len(fs), "code", fs[0].Code,
		"eventId", fs[0].EventID, "error", fs[0].Message, "delay", fs[0].Delay.String())
	return n, nil
}

func (r *Relay) markDeadAndRelease(ctx context.Context, token string, out *outcome) {
	if len(out.dead) > 0 {
		n, err := r.store.MarkDead(ctx, token, out.dead)
		if err != nil {
			r.m.Errors.WithLabelValues("mark").Inc()
			r.log.Error(err, "mark DEAD failed", "rows", len(out.dead))
		} else {
			if lost := int64(len(out.dead)) - n; lost > 0 {
				r.m.MarkFenced.Add(float64(lost))
			}
			for _, f := range out.dead {
				r.m.SendDead.WithLabelValues(out.dest[f.EventID], f.Code).Inc()
				r.log.Info("event is DEAD", "eventId", f.EventID, "code", f.Code)
			}
		}
	}
	if len(out.release) > 0 {
		n, err := r.store.Release(ctx, token, out.release)
		if err != nil {
			r.m.Errors.WithLabelValues("mark").Inc()
			r.log.Error(err, "release failed; rows wait for lease expiry", "rows", len(out.release))
		} else {
			r.m.LeaseReleased.Add(float64(n))
		}
	}
}
