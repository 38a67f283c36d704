package relay_test

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-operator/outbox-operator/relayworker/metrics"
)

// testutilCounter sums every series of a metric family.
func testutilCounter(m *metrics.Metrics, name string) float64 {
	mfs, err := m.Registry.Gather()
	if err != nil {
		return -1
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mm := range mf.GetMetric() {
			if c := mm.GetCounter(); c != nil {
				sum += c.GetValue()
			}
			if g := mm.GetGauge(); g != nil {
				sum += g.GetValue()
			}
		}
	}
	return sum
}

// kfakeProduceError answers every Produce request for topic with error code, forever.
func kfakeProduceError(topic string, code int16) func(kmsg.Request) (kmsg.Response, error, bool) {
	return func(req kmsg.Request) (kmsg.Response, error, bool) {
		pr, ok := req.(*kmsg.ProduceRequest)
		if !ok {
			return nil, nil, false
		}
		hit := false
		for _, t := range pr.Topics {
			if t.Topic == topic {
				hit = true
			}
		}
		if !hit {
			return nil, nil, false
		}
		broker.Cluster.KeepControl()
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range pr.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	}
}
