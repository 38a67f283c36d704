// loop.go: the relay loop. Each turn: rebalance the shard leases when due (every
// lease/3), publish the hold table's due rows and settle them (when an advance or
// settle may have made rows due, and at least once per poll interval), read a window
// batch and publish and advance it; once a read finds nothing the worker has caught
// up: it ticks, reads again, and otherwise waits with the idle back-off (so an idle
// worker tries about one tick per poll interval, and a tick is recorded only when
// something committed since the last one). A turn after a short batch or after
// nothing ticks before its read. Broker-wide failures pause it (brokerpause);
// database errors back it off.

package shardrelay

import (
	"context"
	"errors"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/pace"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardstore"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
	"github.com/outbox-operator/outbox-operator/internal/startstop"
)

// loopState is the loop's state between turns.
type loopState struct {
	r          *Relay
	pace       *pace.Pacer
	failures   int       // database errors in a row
	lastDue    time.Time // last read of the due hold rows
	holdsDirty bool      // an advance wrote hold rows or a settle changed some: read the due ones now
	ticked     bool      // this turn ticked already
	// caughtUp: the last read returned every row up to the newest tick it saw (a
	// short batch, or nothing), so the next read finds something only after a tick.
	caughtUp bool
	// ahead is the read running beside this batch's publish (nil: none); aheadExcl
	// are the shards of the batch in flight, whose rows it must not return.
	ahead     chan readResult
	aheadExcl map[int16]bool
}

// readResult is what a read returned.
type readResult struct {
	b     shardstore.Batch
	start time.Time
	err   error
}

// loop relays until ctx ends; a started batch runs under work, so it is published and
// advanced (or given up at ShutdownTimeout) before loop returns.
func (r *Relay) loop(ctx, work context.Context) {
	l := &loopState{r: r, pace: pace.New(r.cfg.PollInterval), holdsDirty: true}
	defer l.dropAhead()
	for {
		if ctx.Err() != nil {
			r.log.Info("stop signal: no more reads")
			return
		}
		r.health.Beat()
		news, due := r.leaseNews.Swap(false), !time.Now().Before(r.nextRebalance)
		if news || due {
			l.dropAhead() // it read under the leases this round may change
			if err := r.rebalance(work, due); err != nil {
				l.failed(ctx, "lease", err)
				continue
			}
		}
		busy, err := l.turn(ctx, work)
		if err != nil {
			l.failed(ctx, "claim", err)
			continue
		}
		l.ok()
		if busy {
			l.pace.Reset()
			continue
		}
		l.idle(ctx)
	}
}

// turn publishes the hold table's due rows (when an advance or settle may have made
// rows due, and at least once per poll interval) and one window batch, then settles
// and advances both. The two are one trial for the brokers: a batch refused as a
// whole pauses the worker only when the other part stored nothing either (v1's rule
// for one claimed batch: a failing topic's events are its own failures, counted, while
// other topics' events are stored). busy says there was something to do (so there
// probably is more: no wait before the next turn).
func (l *loopState) turn(ctx, work context.Context) (busy bool, err error) {
	r := l.r
	var due *duePart
	if l.holdsDirty || time.Since(l.lastDue) >= r.cfg.PollInterval {
		l.lastDue, l.holdsDirty = time.Now(), false
		if due, err = r.publishDue(work); err != nil {
			l.holdsDirty = true
			return false, err
		}
	}
	bp, err := l.readAndPublish(ctx, work)
	if err != nil {
		return false, err
	}
	rd := combine(due.roundOf(), bp.roundOf())
	if err := r.settleDue(due, rd.down); err != nil {
		l.holdsDirty = true
		return false, err
	}
	holds, err := r.advance(bp, rd.down)
	if err != nil {
		return false, err
	}
	l.holdsDirty = l.holdsDirty || holds || due.changed()
	if r.afterRound(ctx, rd) {
		l.dropAhead()    // the trial is one batch, read after the pause
		return true, nil // paused for the brokers, and back for the trial (or stopped)
	}
	if rd.items > 0 || bp != nil {
		return true, nil
	}
	if !r.brk.Up() && ctx.Err() == nil && !r.waiting(ctx) {
		r.brk.Resume(ctx, "nothing to send")
	}
	return false, nil
}

// readAndPublish reads a window batch and publishes it. When the read finds nothing
// the worker has caught up: a tick makes what committed since the last one readable
// (Tick records one only when needed; the idle back-off spaces the turns of an idle
// worker), and the read runs again, also when another worker recorded the tick. A
// turn after a short batch (or after nothing) ticks before it reads: a read before
// the tick would only find nothing again (one statement less per batch with a
// trickle, and a worker woken by NOTIFY ticks at once). nil: nothing to read.
func (l *loopState) readAndPublish(ctx, work context.Context) (*batchPart, error) {
	r := l.r
	l.ticked = false
	if l.ahead != nil {
		res, excl := <-l.ahead, l.aheadExcl
		l.ahead, l.aheadExcl = nil, nil
		if res.err == nil {
			r.next = res.b.Next
			if b := without(res.b, excl); len(b.Windows) > 0 {
				l.caughtUp = !full(b, r.cfg.BatchSize)
				l.readAhead(work, b)
				return r.publishBatch(work, b, res.start), nil
			}
		}
	}
	if l.caughtUp {
		if err := l.tick(work); err != nil {
			return nil, err
		}
	}
	for range 2 {
		b, start, err := r.read(work)
		if err != nil {
			return nil, err
		}
		if len(b.Windows) > 0 {
			l.caughtUp = !full(b, r.cfg.BatchSize)
			l.readAhead(work, b)
			return r.publishBatch(work, b, start), nil
		}
		l.caughtUp = true
		if l.ticked {
			return nil, nil // this turn's tick made nothing readable
		}
		if err := l.tick(work); err != nil {
			return nil, err
		}
		// Read again whether or not this tick was recorded: another worker's may have
		// been, just before.
	}
	return nil, nil
}

// tick tries a tick (shardstore.Store.Tick records one only when needed).
func (l *loopState) tick(work context.Context) error {
	drainWake(l.r.wake) // the tick covers what a NOTIFY announced so far
	l.ticked = true
	_, _, err := l.r.st.Tick(work, l.r.leases.Tokens())
	return err
}

// full says a read returned a whole batch (events and sentinel rows count towards
// the limit), so there is probably more to read; a shorter one read every window of
// the worker's shards to its end.
func full(b shardstore.Batch, size int) bool {
	return len(b.Events)+len(b.Windows) >= size
}

// drainWake drops a wake-up that came before the tick about to start: that tick
// covers the commits it announced.
func drainWake(wake chan struct{}) {
	select {
	case <-wake:
	default:
	}
}

// readAhead starts the next read beside the publish of b when b was full (a
// backlog): from the shard after b's last, and its result drops b's shards, whose
// cursors move only with b's advance. Their aggregates are b's alone (one aggregate,
// one shard), so nothing the other shards hold depends on b's outcome. Not while
// paused for the brokers: the trial is one batch.
func (l *loopState) readAhead(work context.Context, b shardstore.Batch) {
	r := l.r
	if !full(b, r.cfg.BatchSize) || !r.brk.Up() {
		return
	}
	excl := make(map[int16]bool, len(b.Windows))
	for _, w := range b.Windows {
		excl[w.Shard] = true
	}
	tokens := r.leases.Tokens()
	ch := make(chan readResult, 1)
	l.ahead, l.aheadExcl = ch, excl
	go func() { ch <- r.readFrom(work, tokens, b.Next+1) }()
}

// dropAhead waits for the read ahead, if one runs, and forgets it (read again later).
func (l *loopState) dropAhead() {
	if l.ahead != nil {
		<-l.ahead
		l.ahead, l.aheadExcl = nil, nil
	}
}

// without is b less the windows and events of the shards in excl.
func without(b shardstore.Batch, excl map[int16]bool) shardstore.Batch {
	out := shardstore.Batch{Next: b.Next}
	for _, w := range b.Windows {
		if !excl[w.Shard] {
			out.Windows = append(out.Windows, w)
		}
	}
	for _, e := range b.Events {
		if !excl[e.Shard] {
			out.Events = append(out.Events, e)
		}
	}
	return out
}

// combine is the broker verdict on a turn's two parts: refused as a whole only when
// one part was and neither stored anything nor got an answer from a broker.
func combine(a, b round) round {
	rd := round{items: a.items + b.items, sent: a.sent + b.sent, answered: a.answered || b.answered}
	for _, x := range []round{a, b} {
		if x.down && rd.sent == 0 && !rd.answered && !rd.down {
			rd.down, rd.code, rd.msg, rd.topics = true, x.code, x.msg, x.topics
		}
	}
	return rd
}

// round is what one publish of a batch or of due hold rows did, for the broker pause.
type round struct {
	items    int  // events read (or due hold rows)
	sent     int  // stored by a broker
	answered bool // a broker answered for at least one message (brokerpause.Answered)
	// down: the brokers refused the batch as a whole (brokerpause.BrokerWide), not at
	// shutdown.
	down      bool
	code, msg string
	topics    []string
}

// afterRound applies a round to the broker state: something stored resets the pause
// streak; a batch refused as a whole pauses (and reports true once the pause's wait
// is over, for the trial); a paused worker resumes on a trial a broker answered.
func (r *Relay) afterRound(ctx context.Context, rd round) (paused bool) {
	if rd.sent > 0 {
		r.brk.Stored()
	}
	if rd.down {
		r.brk.Pause(ctx, rd.topics, rd.code, rd.msg)
		return true
	}
	if r.brk.Up() || ctx.Err() != nil {
		return false
	}
	switch {
	case rd.sent > 0:
		r.brk.Resume(ctx, "produce")
	case rd.answered:
		r.brk.Resume(ctx, "broker answer")
	}
	return false
}

// read reads a window batch of the leased shards, round robin from where the last
// one ended.
func (r *Relay) read(work context.Context) (shardstore.Batch, time.Time, error) {
	res := r.readFrom(work, r.leases.Tokens(), r.next)
	if res.err == nil {
		r.next = res.b.Next
	}
	return res.b, res.start, res.err
}

// readFrom reads a window batch of tokens' shards starting with shard from (which may
// be the shard count: the read wraps round). It touches no loop state, so it may run
// beside the loop.
func (r *Relay) readFrom(work context.Context, tokens []string, from int16) readResult {
	res := readResult{start: time.Now()}
	if len(tokens) == 0 {
		return res
	}
	res.b, res.err = r.st.Read(work, tokens, from, r.cfg.BatchSize)
	r.m.ClaimLatency.Observe(time.Since(res.start).Seconds())
	if res.err == nil {
		r.m.ClaimBatchSize.Observe(float64(len(res.b.Events)))
	}
	return res
}

// rebalance is one lease round (shardstore.Store.Rebalance): heartbeat, renew, give
// up shards over the fair share, take free ones. A round of the worker's own schedule
// (due) that leaves it under its share while others hold more asks them for a round
// now (Store.AnnounceWanted); a round another worker's announcement started does not,
// so workers under their share never wake each other in a loop.
func (r *Relay) rebalance(ctx context.Context, due bool) error {
	start := time.Now()
	had := r.leases.Len()
	r.nextRebalance = start.Add(r.cfg.Lease / 3)
	plan, err := r.st.Rebalance(ctx, &r.leases)
	held := map[int16]bool{}
	for _, s := range r.leases.Shards() {
		held[s] = true
		r.renewed[s] = start // renewed or acquired by this round (or lost: the advance's fence says so)
	}
	for s := range r.renewed {
		if !held[s] {
			delete(r.renewed, s)
		}
	}
	if err != nil {
		return err
	}
	if plan.Soon {
		// Another worker holds more than its share: ask it to release now (it
		// announces the release, which starts this worker's next round), and look
		// again after a poll interval anyway, not a lease/3 later.
		r.nextRebalance = start.Add(min(r.cfg.Lease/3, r.cfg.PollInterval))
		if due {
			if err := r.st.AnnounceWanted(ctx); err != nil {
				return err
			}
		}
	}
	if n := r.leases.Len(); n != had || len(plan.Release) > 0 {
		r.log.Info("shard leases", "held", n, "before", had, "released", len(plan.Release))
	}
	return nil
}

// keepLeases renews the leases while the worker is paused for the brokers.
func (r *Relay) keepLeases(ctx context.Context) {
	if time.Now().Before(r.nextRebalance) {
		return
	}
	if err := r.rebalance(ctx, true); err != nil && ctx.Err() == nil {
		r.m.Errors.WithLabelValues("lease").Inc()
		r.log.V(1).Info("lease round failed while paused", "error", err.Error())
	}
}

// deadline is when a batch of these shards must be published by: the earliest lease
// renewal among them plus the lease, less the margin (a shard not held: now).
func (r *Relay) deadline(shards []int16) time.Time {
	d := time.Time{}
	for _, s := range shards {
		at, ok := r.renewed[s]
		if !ok {
			return time.Now()
		}
		if t := at.Add(r.cfg.Lease - r.cfg.LeaseMargin); d.IsZero() || t.Before(d) {
			d = t
		}
	}
	return d
}

// failed backs off after a database error and says why in readiness: a hot standby
// (failover demoted the primary) or a database error.
func (l *loopState) failed(ctx context.Context, stage string, err error) {
	r := l.r
	l.dropAhead() // read before the failure (a lost lease, a restarted server): read again
	l.failures++
	r.m.Errors.WithLabelValues(stage).Inc()
	delay := r.cfg.Backoff.Delay(l.failures)
	reason := "database error: " + err.Error()
	c, cancel := context.WithTimeout(ctx, 3*time.Second)
	if ok, perr := r.primary(c); perr == nil && !ok {
		reason = store.ErrHotStandby.Error()
	}
	cancel()
	r.health.SetReady(false, reason)
	if !errors.Is(err, context.Canceled) {
		r.log.Error(err, "relay cycle failed; backing off", "delay", delay.String(), "failures", l.failures)
	}
	startstop.Sleep(ctx, delay)
}

// ok records a turn that worked: readiness returns after failures (unless paused).
func (l *loopState) ok() {
	if l.failures > 0 {
		l.failures = 0
		if l.r.brk.Up() {
			l.r.health.SetReady(true, "")
		}
	}
}

// idle waits after a turn with nothing to do: the pacer's wait (at most until the
// next lease round), cut short by the stop signal or a NOTIFY (plus WakeLinger, so a
// burst of commits costs one tick and read, not one per commit). Not at all when
// another worker released shards: the lease round that takes them comes first.
func (l *loopState) idle(ctx context.Context) {
	if l.r.leaseNews.Load() {
		return // a turn's tick drained the wake-up that came with it
	}
	d := l.pace.Idle()
	if until := time.Until(l.r.nextRebalance); until < d {
		d = max(until, 0)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-l.r.wake:
		startstop.Sleep(ctx, pace.WakeLinger)
	case <-t.C:
	}
}
