package kafkatest

import (
	"context"
	"net"
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

// TestUnplugRefusesAndReplugKeepsData proves the outage helpers: while unplugged the
// port refuses connections and writes fail; after Replug the same address serves
// again with the earlier records still there.
func TestUnplugRefusesAndReplugKeepsData(t *testing.T) {
	b, err := StartUnpluggable(1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	write := func(v string) error {
		w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, MaxAttempts: 1}
		defer w.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return w.WriteMessages(ctx, kafka.Message{Topic: "plug", Value: []byte(v)})
	}
	if err := b.CreateTopic("plug", 1); err != nil {
		t.Fatal(err)
	}
	if err := write("before"); err != nil {
		t.Fatal(err)
	}
	if err := b.Unplug(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", b.Addrs()[0], time.Second); err == nil {
		c.Close()
		t.Fatal("dial succeeded while unplugged")
	}
	if err := write("during"); err == nil {
		t.Fatal("write succeeded while unplugged")
	}
	if err := b.Replug(); err != nil {
		t.Fatal(err)
	}
	if err := write("after"); err != nil {
		t.Fatal(err)
	}
	recs, err := b.ReadAllWithin(10*time.Second, "plug", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || string(recs[0].Value) != "before" || string(recs[1].Value) != "after" {
		t.Fatalf("records after replug: %d, want before+after", len(recs))
	}
	if err := (&Broker{}).Unplug(); err == nil {
		t.Fatal("Unplug on a plain broker succeeded")
	}
}
