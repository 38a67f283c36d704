package relay_test

import (
	"sort"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/metrics"
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

// checkAggregateOrder fails t unless each aggregate's versions follow one another
// (1, 2, 3, ...) in partition order: no gap, no reordering, no duplicate.
func checkAggregateOrder(t *testing.T, recs []*kgo.Record) {
	t.Helper()
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return recs[i].Offset < recs[j].Offset
	})
	last := map[string]int{}
	for _, r := range recs {
		a := header(r, "aggregate_id")
		v, err := strconv.Atoi(header(r, "aggregate_version"))
		if err != nil {
			t.Fatalf("aggregate %s: version header: %v", a, err)
		}
		if v != last[a]+1 {
			t.Fatalf("aggregate %s: version %d after %d", a, v, last[a])
		}
		last[a] = v
	}
}

// publishes is how many batches the worker published (outbox_publish_latency_seconds'
// sample count).
func publishes(m *metrics.Metrics) uint64 {
	mfs, err := m.Registry.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() == "outbox_publish_latency_seconds" {
			var n uint64
			for _, mm := range mf.GetMetric() {
				n += mm.GetHistogram().GetSampleCount()
			}
			return n
		}
	}
	return 0
}
