// publish.go: publishing events (of a window batch or due hold rows) in
// per-aggregate order, and what each result means (verdict.Decide, v1's rules) as a
// shardstore.Result.

package shardrelay

import (
	"context"
	"errors"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/batchspan"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/brokerpause"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardstore"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/verdict"
)

// item is one event to publish.
type item struct {
	row *event.Row
	agg shardstore.AggregateKey
	msg kafka.Message
	// bad: the row cannot become a message (bad headers, no destination, ...): DEAD
	// without being sent, and it does not hold back its successors.
	bad *verdict.Verdict
}

// newItem maps row to its message in the worker's format.
func (r *Relay) newItem(row *event.Row) item {
	it := item{row: row, agg: shardstore.AggregateKey{Type: row.AggregateType, ID: row.AggregateID}}
	msg, err := r.cfg.Format.Message(row)
	if err != nil {
		v := verdict.Verdict{Kind: verdict.Dead, Code: publish.CodeInvalidPayload, Message: err.Error()}
		var bad *publish.BadEventError
		if errors.As(err, &bad) {
			v.Code, v.Message = bad.Code, bad.Msg
		}
		it.bad = &v
		return it
	}
	it.msg = msg
	return it
}

// sent is the outcome of publishing items.
type sent struct {
	res   []publish.Result // res[i] is items[i]'s (zero when not tried)
	tried []bool           // false: bad, or held back behind a failed older version
	round
}

// triedAny: something was handed to the brokers.
func (s *sent) triedAny() bool {
	for _, t := range s.tried {
		if t {
			return true
		}
	}
	return false
}

// send publishes items, in their order, before deadline. Several versions of one
// aggregate go out in one produce only while they share destination and key (one
// partition, stored or refused as a whole, in order); where an aggregate's next
// version goes elsewhere, it waits for a later wave that runs only once every older
// version of the aggregate was stored (or went DEAD). So no version can land before
// an older one that is still to be retried. The usual batch is one wave.
func (r *Relay) send(work context.Context, items []item, deadline time.Time) sent {
	out := sent{res: make([]publish.Result, len(items)), tried: make([]bool, len(items))}
	wave := make([]int, len(items))
	type last struct {
		dest, key string
		wave      int
	}
	prev := map[shardstore.AggregateKey]last{}
	waves := 0
	for i := range items {
		it := &items[i]
		if it.bad != nil {
			wave[i] = -1
			continue
		}
		p, seen := prev[it.agg]
		w := 0
		if seen {
			w = p.wave
			if p.dest != it.row.Destination || p.key != it.row.MessageKey {
				w++
			}
		}
		prev[it.agg] = last{it.row.Destination, it.row.MessageKey, w}
		wave[i] = w
		waves = max(waves, w+1)
	}
	topics := map[string]bool{}
	blocked := map[shardstore.AggregateKey]bool{}
	var tried []publish.Result
	for w := 0; w < waves; w++ {
		var msgs []kafka.Message
		var idx []int
		for i := range items {
			if wave[i] == w && !blocked[items[i].agg] {
				msgs = append(msgs, items[i].msg)
				idx = append(idx, i)
				topics[items[i].row.Destination] = true
			}
		}
		if len(msgs) == 0 {
			continue
		}
		if time.Until(deadline) <= 0 {
			break // the rest waits: it is held back (Unsent), never published late
		}
		pctx, cancel := context.WithDeadline(work, deadline)
		pctx, span := batchspan.Start(pctx, msgs)
		t0 := time.Now()
		res := r.pub.Publish(pctx, msgs)
		cancel()
		batchspan.End(span, res)
		r.m.PublishLatency.Observe(time.Since(t0).Seconds())
		for k, i := range idx {
			out.res[i], out.tried[i] = res[k], true
			tried = append(tried, res[k])
			if res[k].Err != nil && !permanent(res[k].Err) {
				blocked[items[i].agg] = true
			}
		}
		if down, _, _ := brokerpause.BrokerWide(res); down {
			break
		}
	}
	out.items = len(items)
	for _, res := range tried {
		if res.Err == nil {
			out.sent++
		}
	}
	out.answered = brokerpause.Answered(tried)
	if down, code, msg := brokerpause.BrokerWide(tried); down && work.Err() == nil {
		// A publish cut short by the stop signal says nothing about the brokers.
		out.down, out.code, out.msg = true, code, msg
		for t := range topics {
			out.topics = append(out.topics, t)
		}
	}
	return out
}

// permanent: the failure is the message's own and DEAD; it holds nothing back.
func permanent(err error) bool {
	if errors.Is(err, publish.ErrNotSent) {
		return false
	}
	class, _ := publish.Classify(err)
	return class == publish.Permanent
}

// decide is the verdict on item i (v1's rules, verdict.Decide): release says the
// failure is the worker's (shutdown, the brokers down). An item held back in send is
// a Release.
func (r *Relay) decide(items []item, s *sent, i int, release bool) verdict.Verdict {
	it := &items[i]
	if it.bad != nil {
		return *it.bad
	}
	if !s.tried[i] {
		return verdict.Verdict{Kind: verdict.Release}
	}
	v := verdict.Decide(it.row, s.res[i], r.cfg.UnknownTopicGrace, r.cfg.Backoff, release)
	if v.Classified && v.Class == publish.Unknown {
		r.m.SendUnknown.WithLabelValues(it.row.Destination).Inc()
	}
	if v.Kind == verdict.Dead && v.Class == publish.Permanent {
		r.log.Info("permanent publish failure; event is DEAD", "eventId", it.row.EventID, "attempt", it.row.RetryCount+1, "code", v.Code)
	}
	return v
}

// result is a verdict as the hold table's decisions take it: a counted retry is
// Failed, a retry without an attempt (a missing topic inside the grace) and a
// release are Unsent, DEAD is Rejected.
func result(v verdict.Verdict) shardstore.Result {
	res := shardstore.Result{Code: v.Code, Message: v.Message, RetryIn: v.Delay}
	switch v.Kind {
	case verdict.Sent:
		res.Outcome = shardstore.Sent
	case verdict.Retry:
		res.Outcome = shardstore.Failed
		if v.Uncounted {
			res.Outcome = shardstore.Unsent
		}
	case verdict.Dead:
		res.Outcome = shardstore.Rejected
	default:
		res = shardstore.Result{Outcome: shardstore.Unsent}
	}
	return res
}
