package kafkatest

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestKafkaGoWritesAreReadBack proves kfake speaks enough of the protocol for the
// relay's client (kafka-go, acks=all, hash balancer) and that ReadAll sees the records.
func TestKafkaGoWritesAreReadBack(t *testing.T) {
	b, err := Start(3)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.CreateTopic("orders", 3); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{
		Addr:         kafka.TCP(b.Addrs()...),
		RequiredAcks: kafka.RequireAll,
		Balancer:     &kafka.Murmur2Balancer{},
		BatchTimeout: 5 * time.Millisecond,
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = w.WriteMessages(ctx,
		kafka.Message{Topic: "orders", Key: []byte("a"), Value: []byte(`{"n":1}`)},
		kafka.Message{Topic: "orders", Key: []byte("a"), Value: []byte(`{"n":2}`)},
	)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := b.ReadAllWithin(10*time.Second, "orders", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || string(recs[0].Value) != `{"n":1}` || string(recs[1].Value) != `{"n":2}` {
		t.Fatalf("unexpected records: %+v", recs)
	}
	if recs[0].Partition != recs[1].Partition {
		t.Fatalf("same key landed on partitions %d and %d", recs[0].Partition, recs[1].Partition)
	}
	if got := b.Count("orders"); got != 2 {
		t.Fatalf("Count = %d, want 2", got)
	}
}
