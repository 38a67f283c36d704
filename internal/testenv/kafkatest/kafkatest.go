// Package kafkatest runs an in-process Kafka-protocol broker (franz-go's kfake) for
// tests and benchmarks, and reads topics back with a real Kafka client so assertions
// see exactly what a consumer would.
package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Broker is a running kfake cluster.
type Broker struct {
	// Cluster gives fault-injection access (ControlKey, Fault, topic admin).
	Cluster *kfake.Cluster

	plug *plug // set by StartUnpluggable
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

// StartUnpluggable is Start for a broker that a test can take off the network and put
// back (Unplug, Replug) while it keeps its data, like a real broker with durable logs
// that restarts or is partitioned away. It has one node.
func StartUnpluggable(partitions int32, opts ...kfake.Opt) (*Broker, error) {
	p := &plug{}
	b, err := Start(partitions, append(opts, kfake.ListenFn(p.listen))...)
	if err != nil {
		return nil, err
	}
	b.plug = p
	return b, nil
}

// Unplug takes the broker off the network: its port stops listening (clients get
// "connection refused") and every open connection is closed. Data is kept.
func (b *Broker) Unplug() error {
	if b.plug == nil {
		return errors.New("kafkatest: Unplug needs a broker from StartUnpluggable")
	}
	b.plug.unplug()
	return nil
}

// Replug puts an unplugged broker back on the network on the same address.
func (b *Broker) Replug() error {
	if b.plug == nil {
		return errors.New("kafkatest: Replug needs a broker from StartUnpluggable")
	}
	return b.plug.replug()
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

// plug is the listener kfake gets from StartUnpluggable: it hands kfake the
// connections of a real listener that unplug closes and replug opens again on the
// same address, so kfake's accept loop never sees the outage.
type plug struct {
	mu       sync.Mutex
	addr     net.Addr
	ln       net.Listener // nil while unplugged
	conns    map[*plugConn]struct{}
	accepted chan net.Conn
	closed   chan struct{}
	once     sync.Once
}

func (p *plug) listen(network, address string) (net.Listener, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.accepted != nil {
		return nil, errors.New("kafkatest: an unpluggable broker has one node")
	}
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	p.addr, p.conns = ln.Addr(), map[*plugConn]struct{}{}
	p.accepted, p.closed = make(chan net.Conn), make(chan struct{})
	p.serve(ln)
	return (*plugListener)(p), nil
}

// serve accepts on ln until it is closed; p.mu is held.
func (p *plug) serve(ln net.Listener) {
	p.ln = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.ln != ln { // unplugged meanwhile
				p.mu.Unlock()
				c.Close()
				continue
			}
			pc := &plugConn{Conn: c, p: p}
			p.conns[pc] = struct{}{}
			p.mu.Unlock()
			select {
			case p.accepted <- pc:
			case <-p.closed:
				pc.Close()
				return
			}
		}
	}()
}

func (p *plug) unplug() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return
	}
	_ = p.ln.Close()
	p.ln = nil
	for c := range p.conns {
		_ = c.Conn.Close()
	}
	clear(p.conns)
}

func (p *plug) replug() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return nil
	}
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var ln net.Listener
		if ln, err = net.Listen("tcp", p.addr.String()); err == nil {
			p.serve(ln)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kafkatest: replug %s: %w", p.addr, err)
		}
	}
}

type plugListener plug

func (l *plugListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.accepted:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *plugListener) Close() error {
	p := (*plug)(l)
	p.once.Do(func() {
		close(p.closed)
		p.unplug()
	})
	return nil
}

func (l *plugListener) Addr() net.Addr { return l.addr }

// plugConn forgets itself on Close, so unplug only closes live connections.
type plugConn struct {
	net.Conn
	p *plug
}

func (c *plugConn) Close() error {
	c.p.mu.Lock()
	delete(c.p.conns, c)
	c.p.mu.Unlock()
	return c.Conn.Close()
}
