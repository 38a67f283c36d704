// Package kafkatest runs an in-process Kafka-protocol broker (franz-go's kfake) for
// tests and benchmarks, and reads topics back with a real Kafka client so assertions
// see exactly what a consumer would.
package kafkatest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Broker is a running kfake cluster.
type Broker struct {
	// Cluster gives fault-injection access (ControlKey, Fault, topic admin).
	Cluster *kfake.Cluster
}

// Start starts a one-node cluster. Topics are auto-created with `partitions`
// partitions unless opts turn that off; extra kfake options are appended.
func Start(partitions int32, opts ...kfake.Opt) (*Broker, error) {
	all := append([]kfake.Opt{
		kfake.NumBrokers(1),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(int(partitions)),
	}, opts...)
	c, err := kfake.NewCluster(all...)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: start kfake: %w", err)
	}
	return &Broker{Cluster: c}, nil
}

// Addrs are the broker's host:port listen addresses.
func (b *Broker) Addrs() []string { return b.Cluster.ListenAddrs() }

// AddrList is Addrs joined with commas, the form of --brokers / KAFKA_BROKERS.
func (b *Broker) AddrList() string { return strings.Join(b.Addrs(), ",") }

// Close stops the broker.
func (b *Broker) Close() { b.Cluster.Close() }

// CreateTopic creates topic with the given number of partitions.
func (b *Broker) CreateTopic(topic string, partitions int32) error {
	return b.Cluster.CreateTopic(topic, partitions, nil)
}

// ReadAll consumes topic from the beginning until `want` records arrived or ctx ends,
// and returns what it got (fewer than want on timeout, with ctx's error).
func (b *Broker) ReadAll(ctx context.Context, topic string, want int) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(b.Addrs()...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: client: %w", err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(out) < want {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		var fetchErr error
		fetches.EachError(func(_ string, _ int32, err error) { fetchErr = err })
		if fetchErr != nil && !isRetriable(fetchErr) {
			return out, fetchErr
		}
		out = append(out, fetches.Records()...)
	}
	return out, nil
}

// Count returns how many records topic holds right now (sum of partition high
// watermarks); 0 for a topic that does not exist.
func (b *Broker) Count(topic string) int64 {
	var n int64
	for _, p := range b.Cluster.PartitionInfos(topic) {
		n += p.HighWatermark
	}
	return n
}

// ReadAllWithin is ReadAll with a timeout.
func (b *Broker) ReadAllWithin(d time.Duration, topic string, want int) ([]*kgo.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return b.ReadAll(ctx, topic, want)
}

func isRetriable(err error) bool {
	return strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") || strings.Contains(err.Error(), "LEADER_NOT_AVAILABLE")
}
