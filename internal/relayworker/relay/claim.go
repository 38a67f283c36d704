// claim.go: claiming. The claim statement's wrapper, and the claim loop that drives
// the worker: claim, publish, hand the batch to the mark loop, decide when to claim
// again.

package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/pace"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
	"github.com/outbox-operator/outbox-operator/internal/startstop"
)

// WakeLinger is how long a worker woken by NOTIFY waits before claiming
// (pace.WakeLinger: one claim per burst of commits, not one per commit).
const WakeLinger = pace.WakeLinger

// claimed is the result of one claim statement.
type claimed struct {
	token string
	rows  []event.Row
	start time.Time // when the claim was sent: the conservative start of the lease
	err   error
	after func() // the feed's done for a claim by id: called once marked or given up
}

// finish runs after, once: a batch that will not be marked is done too.
func (c *claimed) finish() {
	if c.after != nil {
		c.after()
		c.after = nil
	}
}

// claim claims up to BatchSize rows under a fresh owner token. With a feed it claims
// delivered ids first, and polls when the feed had nothing or PollInterval passed
// since the last poll (RETRY rows, expired leases and rows the feed left must not
// wait behind a busy stream).
func (r *Relay) claim(ctx context.Context) claimed {
	if r.cfg.Feed == nil {
		return r.claimPolled(ctx)
	}
	if time.Since(r.lastPoll) < r.cfg.PollInterval {
		if c, ok := r.claimFed(ctx); ok {
			return c
		}
	}
	r.lastPoll = time.Now()
	c := r.claimPolled(ctx)
	if c.err != nil || len(c.rows) > 0 {
		return c
	}
	if f, ok := r.claimFed(ctx); ok {
		return f
	}
	return c
}

// claimPolled is the polling claim.
func (r *Relay) claimPolled(ctx context.Context) claimed {
	c := claimed{token: r.newToken(), start: time.Now()} // monotonic: only durations are taken from the worker clock
	c.rows, c.err = r.store.Claim(ctx, c.token, r.cfg.BatchSize, r.cfg.Lease)
	r.observeClaim(c)
	return c
}

// claimFed claims the rows of ids the feed delivered; ok is false when the feed had
// nothing claimable (ids already SENT or taken, or left to polling for their order).
func (r *Relay) claimFed(ctx context.Context) (claimed, bool) {
	for range 4 {
		ids, done := r.cfg.Feed.Take(r.cfg.BatchSize)
		if len(ids) == 0 {
			done(nil)
			return claimed{}, false
		}
		c := claimed{token: r.newToken(), start: time.Now()}
		c.rows, c.err = r.store.ClaimIDs(ctx, c.token, ids, r.cfg.Lease)
		r.observeClaim(c)
		retry := r.leftPending(ctx, ids, c)
		c.after = func() { done(retry) }
		if c.err != nil || len(c.rows) > 0 {
			r.cfg.Feed.Claimed(len(c.rows))
			return c, true
		}
		c.finish()
	}
	return claimed{}, false
}

// leftPending are the ids a claim by id did not take that may still be claimable:
// rows still PENDING (an older version of their aggregate had not arrived yet, because
// two producers committed an aggregate's versions out of order, or was locked by
// another claim), and rows not visible yet (the walsender can send a commit a moment
// before the committing backend has left the proc array, so a snapshot taken right
// then still misses the row). The feed offers them again instead of leaving them to
// polling's hand-over age; rows already claimed elsewhere or sent are dropped.
func (r *Relay) leftPending(ctx context.Context, ids []string, c claimed) []string {
	if c.err != nil || len(c.rows) == len(ids) {
		return nil
	}
	got := make(map[string]bool, len(c.rows))
	for i := range c.rows {
		got[c.rows[i].EventID] = true
	}
	var left []string
	for _, id := range ids {
		if !got[id] {
			left = append(left, id)
		}
	}
	settled, err := r.store.Settled(ctx, left)
	if err != nil {
		return nil // polling has them after the hand-over age
	}
	gone := make(map[string]bool, len(settled))
	for _, id := range settled {
		gone[id] = true
	}
	retry := left[:0]
	for _, id := range left {
		if !gone[id] {
			retry = append(retry, id)
		}
	}
	return retry
}

func (r *Relay) observeClaim(c claimed) {
	r.m.ClaimLatency.Observe(time.Since(c.start).Seconds())
	if c.err == nil {
		r.m.ClaimBatchSize.Observe(float64(len(c.rows)))
	}
}

// newToken returns a fresh owner token: worker id plus 64 random bits.
func (r *Relay) newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return r.cfg.WorkerID + "/" + hex.EncodeToString(b[:])
}

// unclaim hands a claimed but unpublished batch back (shutdown, broker pause).
func (r *Relay) unclaim(c claimed) {
	defer c.finish()
	if c.err != nil || len(c.rows) == 0 {
		return
	}
	out := outcome{dest: map[string]string{}}
	for i := range c.rows {
		out.release = append(out.release, c.rows[i].EventID)
	}
	r.marks.mark(c.token, &out)
}

// claimLoop claims, publishes and hands each batch to the mark loop until ctx ends,
// or until a claim finds the table upgraded to contract v2 (UpgradedError).
// A started claim always completes (it runs under work, not ctx), so no row is left
// SENDING by a cancelled claim.
//
// While draining (the last claim was full), the next claim runs during this batch's
// publish. Its rows are claimable only because they do not depend on anything in
// flight: the claim skips newer versions of aggregates whose older version is
// SENDING, and this batch stays SENDING until its mark commits.
func (r *Relay) claimLoop(ctx, work context.Context) error {
	l := &loop{r: r, pace: newPacer(r.cfg.PollInterval), poll: time.NewTimer(0)}
	defer l.poll.Stop()
	for {
		if ctx.Err() != nil {
			l.dropAhead() // claimed, never published: release for other workers
			r.log.Info("stop signal: no more claims")
			return nil
		}
		r.health.Beat()
		c := l.next(work)
		if l.publish(ctx, work, c) {
			continue // paused for the brokers, and resumed (or stopped)
		}
		if c.err != nil {
			if r.upgraded(ctx, c.err) {
				l.dropAhead()
				return &UpgradedError{Table: r.cfg.Table}
			}
			l.claimFailed(ctx, c.err)
			continue
		}
		l.claimOK()
		if len(c.rows) > 0 {
			l.pace.Reset()
			continue // rows were there, so there are probably more: claim again at once
		}
		l.idle(ctx)
	}
}

// loop is the claim loop's state between turns.
type loop struct {
	r        *Relay
	ahead    chan claimed // the claim running during this batch's publish, or nil
	failures int          // claim errors in a row
	pace     *pacer
	poll     *time.Timer
}

// next returns this turn's batch: the one claimed ahead, or a fresh claim. A full
// batch says the table holds more, so the next claim starts now, beside the publish;
// not while paused for the brokers: the trial is one batch, sent once.
func (l *loop) next(work context.Context) claimed {
	r := l.r
	var c claimed
	if l.ahead != nil {
		c, l.ahead = <-l.ahead, nil
	} else {
		r.drainWake()
		c = r.claim(work)
	}
	if c.err == nil && len(c.rows) >= r.cfg.BatchSize && r.broker().Up {
		l.ahead = make(chan claimed, 1)
		r.drainWake()
		go func(ch chan<- claimed) { ch <- r.claim(work) }(l.ahead)
	}
	return c
}

// dropAhead hands the batch claimed ahead back unpublished, if there is one.
func (l *loop) dropAhead() {
	if l.ahead != nil {
		l.r.unclaim(<-l.ahead)
		l.ahead = nil
	}
}

// publish publishes c and hands it to the mark loop. It reports true when the brokers
// refused the batch as a whole and the loop paused for them: the batch claimed during
// the failed publish goes back unsent, and the pause ends with the trial, the next
// batch, sent once after the pause's wait (broker.go). A trial that is refused as a
// whole pauses again, its rows released without an attempt; a trial a broker answered
// (stored something, or refused a message for its own sake) resumes. A trial claim
// that found nothing, or sent nothing, says nothing about the brokers: it resumes only
// when no row waits to be sent anywhere in the table (othersWaiting), so an idle
// worker does not report the brokers down after the others drained the backlog, nor
// up while another worker's trial is still being refused.
func (l *loop) publish(ctx, work context.Context, c claimed) (paused bool) {
	r := l.r
	b := r.publish(work, c)
	if b == nil {
		if c.err == nil {
			r.resumeAfterTrial(ctx, nil)
		}
		return false
	}
	if len(b.out.sent) > 0 {
		r.publishedOK()
	}
	r.resumeAfterTrial(ctx, &b.out) // before b is noted: its marks are not written yet
	r.parked.note(b.token, &b.out)
	r.marks.hand(b)
	if b.out.brokerDown == "" {
		return false
	}
	l.dropAhead()
	r.pauseForBroker(ctx, b.out.topics(), b.out.brokerDown, b.out.brokerErr)
	l.pace.Reset()
	return true
}

// resumeAfterTrial ends a pause when the trial's outcome says so (see publish); out is
// nil for a trial claim that found nothing.
func (r *Relay) resumeAfterTrial(ctx context.Context, out *outcome) {
	if r.broker().Up || ctx.Err() != nil || out != nil && out.brokerDown != "" {
		return
	}
	switch {
	case out != nil && len(out.sent) > 0:
		r.resumeFromBroker(ctx, "produce")
	case out != nil && out.answered: // unknown topic, a refusal for the message's own sake
		r.resumeFromBroker(ctx, "broker answer")
	case !r.othersWaiting(ctx): // nothing reached a broker (nothing claimed, held back, bad rows)
		r.resumeFromBroker(ctx, "nothing to send")
	}
}

// othersWaiting reports whether rows wait to be sent (claimed by other workers, or
// held back behind them); on a database error it says yes: stay paused, try again.
func (r *Relay) othersWaiting(ctx context.Context) bool {
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	waiting, err := r.store.Waiting(c)
	return err != nil || waiting
}

// claimFailed backs off after a failed claim and says why in readiness: a hot standby
// (failover demoted the primary) or a database error.
func (l *loop) claimFailed(ctx context.Context, err error) {
	r := l.r
	l.failures++
	r.m.Errors.WithLabelValues("claim").Inc()
	delay := r.cfg.Backoff.Delay(l.failures)
	reason := "database error: " + err.Error()
	if perr := r.checkPrimary(ctx); errors.Is(perr, store.ErrHotStandby) {
		reason = store.ErrHotStandby.Error()
	}
	r.health.SetReady(false, reason)
	r.log.Error(err, "relay cycle failed; backing off", "delay", delay.String(), "failures", l.failures)
	startstop.Sleep(ctx, delay) // cut short by the stop signal, which the loop head handles
}

// claimOK records a claim that worked: readiness returns after failures.
func (l *loop) claimOK() {
	if l.failures > 0 {
		l.failures = 0
		l.r.health.SetReady(true, "")
	}
}

// idle waits after an empty claim: the pacer's wait, cut short by the stop signal, a
// NOTIFY or the feed's Arrived (plus WakeLinger, so a burst of commits costs one
// claim).
func (l *loop) idle(ctx context.Context) {
	if !l.poll.Stop() {
		select {
		case <-l.poll.C:
		default:
		}
	}
	l.poll.Reset(l.pace.Idle())
	select {
	case <-ctx.Done():
	case <-l.r.wake:
		startstop.Sleep(ctx, WakeLinger) // let the announced burst finish: one claim, not one per commit
	case <-l.r.arrived:
		startstop.Sleep(ctx, WakeLinger)
	case <-l.poll.C:
	}
}
