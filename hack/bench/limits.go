// limits.go: the machine's limits for the drain workload, to say how close the relay
// gets: the relay's own statements alone (claim + mark SENT of 500-row batches from 2
// connections, no broker) and the broker alone (the relay's publisher writing the same
// messages in 500-message batches from 2 goroutines, read by the same consumer, no
// database).

package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	outboxevent "github.com/outbox-operator/outbox-operator/internal/relayworker/event" // the bench has its own event type
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
)

type limitResult struct {
	what string
	secs float64
	n    int
	cpu  cpuSample
}

func (r limitResult) rate() float64 { return float64(r.n) / r.secs }

// v1Alone drains n pre-loaded events with the relay's claim and mark statements
// from `loops` connections (a pool of their own, closed at the end so the table's
// statistics are flushed), and measures the load before it too.
func (s *stack) v1Alone(tag string, n, loops int) (cost, error) {
	res := cost{what: "v1 claim + mark SENT", n: n}
	w := newWorkload(tag, n, aggregates, 42)
	p := s.relay("relay", nil, false)
	_, dsn, db, err := s.peerDatabase(p, tag)
	if err != nil {
		return res, err
	}
	defer s.dropDatabase(dsn)
	defer db.Close()
	err = s.measureAlone(&res, db, "outbox_event", func() error { return p.load(db, w) },
		func(done func()) error { return claimAndMarkAll(dsn, loops, done) })
	return res, err
}

// claimAndMarkAll runs claimAndMark from `loops` goroutines on a pool of their own;
// done runs when they finished, before the pool closes (an exited backend takes its
// CPU time out of /proc).
func claimAndMarkAll(dsn string, loops int, done func()) error {
	pool, err := sql.Open("postgres", dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	t, _ := pgident.NewTable("public", "outbox_event")
	st, err := store.New(context.Background(), pool, store.Options{Table: t})
	if err != nil {
		return err
	}
	defer st.Close()
	errs := make(chan error, loops)
	var wg sync.WaitGroup
	for g := 0; g < loops; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- claimAndMark(st, "limit-"+strconv.Itoa(g))
		}()
	}
	wg.Wait()
	done()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func claimAndMark(st *store.Store, worker string) error {
	ctx := context.Background()
	for i := 0; ; i++ {
		tok := worker + "/" + strconv.Itoa(i)
		rows, err := st.Claim(ctx, tok, 500, 30*time.Second)
		if err != nil || len(rows) == 0 {
			return err
		}
		sent := make([]store.Sent, len(rows))
		for k, r := range rows {
			sent[k] = store.Sent{EventID: r.EventID, Partition: 0, Offset: int64(k)}
		}
		if _, err := st.MarkSent(ctx, tok, sent); err != nil {
			return err
		}
	}
}

// brokerAlone publishes the workload's messages (topic, key, payload and the contract
// headers) with the relay's publisher and waits until the consumer read them all.
func (s *stack) brokerAlone(tag string, n, writers int) (limitResult, error) {
	res := limitResult{what: "broker alone (relay's publisher + consumer, no database)", n: n}
	w := newWorkload(tag, n, aggregates, 42)
	if err := s.createTopics(w.topics[0], w.topics[1]); err != nil {
		return res, err
	}
	c, err := startConsumer(s.brokers, w, n, n, func(seq int) (int, int64) { return w.events[seq].agg, w.events[seq].version })
	if err != nil {
		return res, err
	}
	defer c.close()
	pub, err := publish.New(publish.Options{Brokers: []string{s.brokers}, BatchSize: 500})
	if err != nil {
		return res, err
	}
	defer pub.Close()
	msgs := make([]kafka.Message, n)
	for i, e := range w.events {
		r := outboxevent.Row{EventID: w.eventID(e.seq), AggregateType: w.aggType(e.agg), AggregateID: w.aggID(e.agg),
			AggregateVersion: e.version, EventType: w.eventType(e.agg), EventVersion: 1,
			Destination: w.topic(e.agg), MessageKey: w.aggID(e.agg), Payload: []byte(w.payload(e))}
		if h, ok := w.headers(e).(string); ok {
			r.Headers = []byte(h)
		}
		if msgs[i], err = (publish.Format{}).Message(&r); err != nil {
			return res, err
		}
	}
	cpu0 := s.sampleCPU(nil)
	t0 := time.Now()
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := g * 500; start < n; start += writers * 500 {
				for _, r := range pub.Publish(context.Background(), msgs[start:min(start+500, n)]) {
					if r.Err != nil {
						mu.Lock()
						failed = r.Err
						mu.Unlock()
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		return res, fmt.Errorf("broker alone: %w", failed)
	}
	if !c.waitAll(2 * time.Minute) {
		return res, fmt.Errorf("broker alone: only %d of %d read", c.distinct.Load(), n)
	}
	res.secs, res.cpu = time.Since(t0).Seconds(), s.sampleCPU(nil).since(cpu0)
	return res, nil
}
