// advance.go: one window batch: publish its events (not those held behind an older
// version in the hold table), decide what goes to the hold table (PlanHolds), and move
// the shards' cursors in one fenced statement with the hold rows and the batch log.

package shardrelay

import (
	"context"
	"slices"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardstore"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/verdict"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// markTimeout bounds an advance or settle. They run detached from the stop signal: a
// published batch left unadvanced would be published again by the next owner.
const markTimeout = 15 * time.Second

// batchPart is a published window batch, to advance.
type batchPart struct {
	b        shardstore.Batch
	items    []item
	at       []int // at[k] is the event of items[k]
	s        sent
	tooLate  bool // read too late in its shards' leases: not published, read again
	shutdown bool // the publish ran into the stop signal's timeout
}

func (bp *batchPart) roundOf() round {
	if bp == nil {
		return round{}
	}
	return bp.s.round
}

// publishBatch publishes b's events (not those held behind an older version in the
// hold table).
func (r *Relay) publishBatch(work context.Context, b shardstore.Batch, readAt time.Time) *batchPart {
	bp := &batchPart{b: b}
	shards := make([]int16, len(b.Windows))
	for i, w := range b.Windows {
		shards[i] = w.Shard
	}
	for i := range b.Events {
		if !b.Events[i].Held {
			bp.items = append(bp.items, r.newItem(&b.Events[i].Row))
			bp.at = append(bp.at, i)
		}
	}
	deadline := r.deadline(shards)
	if len(bp.items) > 0 && time.Until(deadline) <= 0 {
		r.log.Info("lease nearly expired before publishing; the batch is read again", "events", len(bp.items))
		bp.tooLate = true
		bp.s = sent{round: round{items: len(bp.items)}}
		return bp
	}
	bp.s = r.send(work, bp.items, deadline)
	bp.shutdown = work.Err() != nil
	return bp
}

// advance moves bp's shards past its events, writing the hold rows PlanHolds decides,
// in one fenced statement. It does not when the brokers refused the turn as a whole
// (down) or the stop signal cut the publish short before anything was stored, if
// anything was tried: the events are read again (no attempt counted). holds says hold
// rows were written (some may be due now).
func (r *Relay) advance(bp *batchPart, down bool) (holds bool, err error) {
	if bp == nil || bp.tooLate {
		return false, nil
	}
	if bp.s.triedAny() && (down || bp.shutdown && bp.s.sent == 0) {
		return false, nil
	}
	b := bp.b
	results := make([]shardstore.Result, len(b.Events))
	for i := range results {
		results[i] = shardstore.Result{Outcome: shardstore.Unsent}
	}
	adv := shardstore.Advance{Windows: b.Windows, Partitions: []int32{}, Offsets: []int64{}, Seqs: []int64{}}
	for k, i := range bp.at {
		v := r.decide(bp.items, &bp.s, k, bp.shutdown)
		results[i] = result(v)
		if v.Kind == verdict.Sent {
			adv.Partitions = append(adv.Partitions, int32(bp.s.res[k].Partition))
			adv.Offsets = append(adv.Offsets, bp.s.res[k].Offset)
			adv.Seqs = append(adv.Seqs, b.Events[i].Seq)
		}
	}
	adv.Holds = shardstore.PlanHolds(b.Events, results, r.cfg.MaxAttempts)

	c, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	out, err := r.st.Advance(c, adv)
	if err != nil {
		// Published but not advanced: the events are read and published again (a
		// duplicate, never a loss).
		r.m.Errors.WithLabelValues("mark").Inc()
		return false, err
	}
	moved := map[int16]bool{}
	for _, sh := range out.Shards {
		moved[sh] = true // not renewed: leases are renewed per token, by the lease round
	}
	if len(out.Stale) > 0 {
		// The tick the batch was read under is gone (a PostgreSQL crash lost it and a
		// new tick took its number): nothing moved, the shards are read again.
		r.log.Info("the tick the batch was read under was lost; the shards are read again", "shards", len(out.Stale))
	}
	if lost := r.lostShards(b.Windows, moved, out.Stale); lost > 0 {
		r.log.Info("lease lost before the advance; another worker owns the shards", "events", lost)
	}
	r.countBatch(b.Events, results, adv.Holds, moved)
	return out.Holds > 0, nil
}

// lostShards drops the batch's shards the advance did not move (their leases were
// taken over), except the stale ones (their tick was lost; the lease may still be
// the worker's: the next advance's fence says), and counts their events in
// outbox_mark_fenced_total.
func (r *Relay) lostShards(ws []shardstore.Window, moved map[int16]bool, stale []int16) (events int) {
	for _, w := range ws {
		if !moved[w.Shard] && !slices.Contains(stale, w.Shard) {
			r.leases.Drop(w.Shard)
			delete(r.renewed, w.Shard)
			events += w.Events
		}
	}
	if events > 0 {
		r.m.MarkFenced.Add(float64(events))
	}
	return events
}

// countBatch counts an advanced batch's events in the send metrics (only those of
// shards that moved) and logs its failures as v1's marks do.
func (r *Relay) countBatch(evs []shardstore.Event, results []shardstore.Result, holds []shardstore.Hold, moved map[int16]bool) {
	dest := make(map[string]string, len(evs))
	for i := range evs {
		e := &evs[i]
		if !moved[e.Shard] {
			continue
		}
		dest[e.EventID] = e.Destination
		if results[i].Outcome == shardstore.Sent {
			r.m.SendSuccess.WithLabelValues(e.Destination).Inc()
		}
	}
	var retried []shardstore.Hold
	for _, h := range holds {
		d, ok := dest[h.EventID]
		if !ok {
			continue
		}
		r.countHold(d, h.EventID, h.State, h.Code, h.Attempts > 0 || h.Code != "", &retried, h)
	}
	if len(retried) > 0 {
		h := retried[0]
		r.log.Info("publish failed; scheduled retry", "rows", len(retried), "code", h.Code,
			"eventId", h.EventID, "error", h.Message, "delay", h.RetryIn.String())
	}
}

// countHold counts one event's new hold state: a retry in outbox_send_retry_total
// (tried=false: never sent, a release), DEAD in outbox_send_dead_total; HELD is
// neither (it was never tried).
func (r *Relay) countHold(dest, id, state, code string, tried bool, retried *[]shardstore.Hold, h shardstore.Hold) {
	switch state {
	case schema.StatusRetry:
		if !tried {
			r.m.LeaseReleased.Inc()
			return
		}
		r.m.SendRetry.WithLabelValues(dest, code).Inc()
		*retried = append(*retried, h)
	case schema.StatusDead:
		r.m.SendDead.WithLabelValues(dest, code).Inc()
		r.log.Info("event is DEAD", "eventId", id, "code", code)
	}
}
