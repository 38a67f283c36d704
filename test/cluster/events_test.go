package cluster

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-operator/outbox-operator/outbox"
)

// produce commits aggregates x versions events to topic the way an application does:
// one business row (table orders) and its event per transaction, versions in order,
// aggregates interleaved, one transaction every pace. It returns the event ids.
func produce(ctx context.Context, db *sql.DB, topic, prefix string, aggregates, versions int, pace time.Duration) ([]string, error) {
	pub, err := outbox.New("public", "outbox_event")
	if err != nil {
		return nil, err
	}
	var ids []string
	for v := 1; v <= versions; v++ {
		for a := 0; a < aggregates; a++ {
			agg := fmt.Sprintf("%s-%03d", prefix, a)
			id := outbox.EventID("order", agg, strconv.Itoa(v))
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return ids, err
			}
			if _, err := tx.Exec(`INSERT INTO orders VALUES ($1, $2) ON CONFLICT (order_id) DO UPDATE SET version = EXCLUDED.version`, agg, v); err != nil {
				_ = tx.Rollback()
				return ids, err
			}
			if err := pub.Publish(ctx, tx, outbox.Event{
				EventID: id, AggregateType: "Order", AggregateID: agg, AggregateVersion: int64(v),
				EventType: "OrderUpdated", Destination: topic,
				Payload: json.RawMessage(fmt.Sprintf(`{"order":%q,"version":%d}`, agg, v)),
			}); err != nil {
				_ = tx.Rollback()
				return ids, err
			}
			if err := tx.Commit(); err != nil {
				return ids, err
			}
			ids = append(ids, id)
			if pace > 0 {
				time.Sleep(pace)
			}
		}
	}
	return ids, nil
}

// arrivals is what a consumer of one topic has read so far.
type arrivals struct {
	mu         sync.Mutex
	seen       map[string]int   // event id -> deliveries
	lastOfAgg  map[string]int64 // aggregate -> newest version delivered first-time
	outOfOrder []string
}

// consume reads topic from its start on the host broker until ctx ends.
func consume(ctx context.Context, topic string) *arrivals {
	a := &arrivals{seen: map[string]int{}, lastOfAgg: map[string]int64{}}
	c, err := kgo.NewClient(kgo.SeedBrokers(stack.Broker), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer c.Close()
		for ctx.Err() == nil {
			c.PollFetches(ctx).EachRecord(a.add)
		}
	}()
	return a
}

func (a *arrivals) add(r *kgo.Record) {
	h := map[string]string{}
	for _, kv := range r.Headers {
		h[kv.Key] = string(kv.Value)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	id := h["event_id"]
	a.seen[id]++
	if a.seen[id] > 1 {
		return // a duplicate may repeat an old version
	}
	v, _ := strconv.ParseInt(h["aggregate_version"], 10, 64)
	agg := h["aggregate_id"]
	if last, ok := a.lastOfAgg[agg]; ok && v != last+1 {
		a.outOfOrder = append(a.outOfOrder, fmt.Sprintf("%s: v%d after v%d", agg, v, last))
	}
	a.lastOfAgg[agg] = v
}

// missing returns the ids not delivered yet.
func (a *arrivals) missing(ids []string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var m []string
	for _, id := range ids {
		if a.seen[id] == 0 {
			m = append(m, id)
		}
	}
	return m
}

// duplicates counts deliveries beyond the first of the given ids.
func (a *arrivals) duplicates(ids []string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, id := range ids {
		if a.seen[id] > 1 {
			n += a.seen[id] - 1
		}
	}
	return n
}

func (a *arrivals) orderViolations() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.outOfOrder...)
}
