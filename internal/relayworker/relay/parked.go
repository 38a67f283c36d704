// parked.go: the rows a worker's pause releases on resume. When the brokers go away
// mid-stream, the batches before the one that failed as a whole often fail in part
// (some partitions already refuse): those rows are marked RETRY with a counted attempt
// and a backoff, as the rows' own failure must be. The outage makes that backoff
// pointless, so on resume the worker makes exactly those rows claimable again, and
// nothing else: not other workers' RETRY rows, not rows backed off long before.

package relay

import (
	"context"
	"slices"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
)

// maxParked bounds the rows a worker remembers (a partition that keeps failing while
// the rest works marks rows RETRY batch after batch without a pause). Beyond it the
// oldest are forgotten: they wait out their own backoff (at most --max-backoff).
const maxParked = 10_000

// parked is the (event id, owner token) of each row this worker marked RETRY with a
// broker error code since its last batch without one. It lives in memory only and is
// used by the claim loop alone: after a crash the rows wait out their backoff, which
// delays them by at most --max-backoff and never loses or reorders anything. The token
// makes the release exact: a RETRY row keeps the token of the batch that marked it
// until it is claimed again (store.ReleaseParked).
type parked struct {
	ids, tokens []string
}

// note records a batch about to be marked: its broker-coded RETRY rows join the list;
// a batch the brokers handled without such a failure ends the run-up to an outage and
// clears it. A batch refused as a whole (brokerDown) releases its rows, parks none,
// and keeps the list for the coming resume.
func (p *parked) note(token string, out *outcome) {
	n := 0
	for _, f := range out.retry {
		if !f.Uncounted && slices.Contains(publish.BrokerCodes, f.Code) {
			p.ids, p.tokens = append(p.ids, f.EventID), append(p.tokens, token)
			n++
		}
	}
	if n == 0 && out.brokerDown == "" {
		p.ids, p.tokens = p.ids[:0], p.tokens[:0]
	}
	if over := len(p.ids) - maxParked; over > 0 {
		p.ids, p.tokens = slices.Delete(p.ids, 0, over), slices.Delete(p.tokens, 0, over)
	}
}

// take returns the list and clears it.
func (p *parked) take() (ids, tokens []string) {
	ids, tokens = p.ids, p.tokens
	p.ids, p.tokens = nil, nil
	return ids, tokens
}

// releaseParked makes the parked rows claimable now. Their marks are committed: the
// mark loop takes one batch at a time, so every batch handed before the refused one
// was marked before the refused one was taken, and the pause began after that.
func (r *Relay) releaseParked() {
	ids, tokens := r.parked.take()
	if len(ids) == 0 {
		return
	}
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := r.store.ReleaseParked(c, ids, tokens)
	if err != nil {
		r.m.Errors.WithLabelValues("mark").Inc()
		r.log.Error(err, "could not release the rows parked by the outage; they wait out their backoff", "rows", len(ids))
		return
	}
	r.log.Info("released rows parked by the outage", "rows", n, "parked", len(ids))
}
