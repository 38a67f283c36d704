package kafkatest

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Refusal makes the broker answer Produce requests with an error code on every
// partition while it is on, as a cluster in maintenance does (NOT_ENOUGH_REPLICAS under
// acks=all, REQUEST_TIMED_OUT): metadata, leaders and fetches stay fine, and nothing
// is stored.
type Refusal struct {
	on      atomic.Bool
	code    atomic.Int32
	done    atomic.Bool
	topics  map[string]bool // nil: every topic
	refused atomic.Int64
}

// Kafka error codes a Refusal is typically given.
const (
	ErrRequestTimedOut   int16 = 7
	ErrNotEnoughReplicas int16 = 19
)

// RefuseProduce starts refusing every Produce request that writes to one of topics
// (any topic when none are given) with code; a request that also writes to other
// topics is refused as a whole, as one broker answering for all its partitions would.
// It is on at once; Set turns it on and off, Stop removes it.
func (b *Broker) RefuseProduce(code int16, topics ...string) *Refusal {
	r := &Refusal{}
	if len(topics) > 0 {
		r.topics = map[string]bool{}
		for _, t := range topics {
			r.topics[t] = true
		}
	}
	r.code.Store(int32(code))
	r.on.Store(true)
	b.Cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if r.done.Load() {
			b.Cluster.DropControl()
			return nil, nil, false
		}
		pr := req.(*kmsg.ProduceRequest)
		if !r.on.Load() || !r.hits(pr) {
			return nil, nil, false // not handled: the control stays, the broker answers
		}
		b.Cluster.KeepControl()
		r.refused.Add(1)
		return refusal(pr, int16(r.code.Load())), nil, true
	})
	return r
}

// Set turns the refusal on or off.
func (r *Refusal) Set(on bool) { r.on.Store(on) }

// SetCode changes the error code answered from now on.
func (r *Refusal) SetCode(code int16) { r.code.Store(int32(code)) }

// Refused is the number of Produce requests refused so far.
func (r *Refusal) Refused() int64 { return r.refused.Load() }

// Stop turns the refusal off for good; the control goes at the next Produce request.
func (r *Refusal) Stop() {
	r.on.Store(false)
	r.done.Store(true)
}

func (r *Refusal) hits(pr *kmsg.ProduceRequest) bool {
	if r.topics == nil {
		return true
	}
	for _, t := range pr.Topics {
		if r.topics[t.Topic] {
			return true
		}
	}
	return false
}

// refusal answers every partition of pr with code.
func refusal(pr *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := pr.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range pr.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
