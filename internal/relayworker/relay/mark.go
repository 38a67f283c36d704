// mark.go: record a batch's outcome, every statement fenced by the owner token. The
// mark loop writes them in its own goroutine while the claim loop goes on.

package relay

import (
	"context"
	"time"

	"github.com/go-logr/logr"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/metrics"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
	"github.com/outbox-operator/outbox-operator/internal/startstop"
)

// markTimeout bounds one batch's marks. They run detached from the stop signal: a
// published batch left unmarked would be published again after its lease.
const markTimeout = 15 * time.Second

// marker writes marks. Between start and stop its mark loop takes published batches
// one at a time, while the claim loop claims and publishes the next batch: a batch's
// rows stay SENDING under its token until its mark commits, so the overlap changes
// nothing another claim can see (newer versions of those aggregates stay unclaimable
// until then). The hand-over blocks while the previous mark is still running, so at
// most one batch waits for its marks.
type marker struct {
	store       *store.Store
	m           *metrics.Metrics
	log         logr.Logger
	maxAttempts int

	queue chan *published // the hand-over to the mark loop
	task  *startstop.Task // the mark loop
}

// start runs the mark loop. It ends when stop closes the queue, not with a context:
// every batch handed over is marked, also after the stop signal.
func (mk *marker) start() {
	mk.queue = make(chan *published)
	mk.task = startstop.Start(context.Background(), mk.loop)
}

// loop marks every batch handed over until the queue closes.
func (mk *marker) loop(context.Context) {
	for b := range mk.queue {
		mk.mark(b.token, &b.out)
		if b.after != nil {
			b.after()
		}
	}
}

// hand gives b to the mark loop; it waits while the previous batch is being marked.
func (mk *marker) hand(b *published) { mk.queue <- b }

// stop closes the queue and waits until every batch handed over is marked.
func (mk *marker) stop() {
	close(mk.queue)
	mk.task.Wait()
}

// mark writes one batch's outcome: SENT, RETRY, DEAD, then the released rows.
func (mk *marker) mark(token string, out *outcome) {
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	mk.markSent(ctx, token, out)
	if len(out.retry) > 0 {
		n, err := mk.markRetry(ctx, token, out.retry, out.dest)
		if err == nil {
			mk.fenced(len(out.retry), n)
		}
	}
	mk.markDead(ctx, token, out)
	mk.release(ctx, token, out)
}

// fenced counts rows a mark did not change: another worker took them over after
// this batch's lease ran out.
func (mk *marker) fenced(rows int, changed int64) {
	if lost := int64(rows) - changed; lost > 0 {
		mk.m.MarkFenced.Add(float64(lost))
	}
}

func (mk *marker) markSent(ctx context.Context, token string, out *outcome) {
	if len(out.sent) == 0 {
		return
	}
	n, err := mk.store.MarkSent(ctx, token, out.sent)
	if err != nil {
		// Published but not marked: the lease expires and the rows are sent again
		// (a duplicate, never a loss).
		mk.m.Errors.WithLabelValues("mark").Inc()
		mk.log.Error(err, "mark SENT failed; rows will be re-published after the lease", "rows", len(out.sent))
		return
	}
	if lost := int64(len(out.sent)) - n; lost > 0 {
		mk.m.MarkFenced.Add(float64(lost))
		mk.log.Info("lease lost before marking SENT; another worker owns the rows", "rows", lost)
	}
	counts := map[string]int{}
	for _, s := range out.sent {
		counts[out.dest[s.EventID]]++
	}
	for d, c := range counts {
		mk.m.SendSuccess.WithLabelValues(d).Add(float64(c))
	}
}

func (mk *marker) markRetry(ctx context.Context, token string, fs []store.Failure, dest map[string]string) (int64, error) {
	deadIDs, n, err := mk.store.MarkRetry(ctx, token, mk.maxAttempts, fs)
	if err != nil {
		mk.m.Errors.WithLabelValues("mark").Inc()
		mk.log.Error(err, "mark RETRY failed", "rows", len(fs))
		return 0, err
	}
	dead := map[string]bool{}
	for _, id := range deadIDs {
		dead[id] = true
	}
	for _, f := range fs {
		if dead[f.EventID] {
			mk.m.SendDead.WithLabelValues(dest[f.EventID], store.CodeMaxAttempts).Inc()
			mk.log.Info("attempts used up; event is DEAD", "eventId", f.EventID, "code", f.Code)
		} else {
			mk.m.SendRetry.WithLabelValues(dest[f.EventID], f.Code).Inc()
		}
	}
	// One line per failed batch (not per row), at the default level: a broker outage or
	// a wrong TLS/SASL setting must be visible without debug logs, and the backoff
	// bounds how often this line repeats.
	mk.log.Info("publish failed; scheduled retry", "rows", len(fs), "code", fs[0].Code,
		"eventId", fs[0].EventID, "error", fs[0].Message, "delay", fs[0].Delay.String())
	return n, nil
}

func (mk *marker) markDead(ctx context.Context, token string, out *outcome) {
	if len(out.dead) == 0 {
		return
	}
	n, err := mk.store.MarkDead(ctx, token, out.dead)
	if err != nil {
		mk.m.Errors.WithLabelValues("mark").Inc()
		mk.log.Error(err, "mark DEAD failed", "rows", len(out.dead))
		return
	}
	mk.fenced(len(out.dead), n)
	for _, f := range out.dead {
		mk.m.SendDead.WithLabelValues(out.dest[f.EventID], f.Code).Inc()
		mk.log.Info("event is DEAD", "eventId", f.EventID, "code", f.Code)
	}
}

func (mk *marker) release(ctx context.Context, token string, out *outcome) {
	if len(out.release) == 0 {
		return
	}
	n, err := mk.store.Release(ctx, token, out.release)
	if err != nil {
		mk.m.Errors.WithLabelValues("mark").Inc()
		mk.log.Error(err, "release failed; rows wait for lease expiry", "rows", len(out.release))
		return
	}
	mk.m.LeaseReleased.Add(float64(n))
	// A release is a mark too: rows it did not change were taken over after this
	// batch's lease ran out (a worker paused past its lease whose late publish failed
	// as a whole is released, not marked RETRY).
	mk.fenced(len(out.release), n)
}
