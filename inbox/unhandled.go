package inbox

import (
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// unhandled tracks, per partition and in offset order, the messages a running Run
// fetched and has not yet handled and committed, for the gauge
// inbox_oldest_unhandled_message_age_seconds. Unlike the lag and age gauges, which
// move when offsets commit, it is read at scrape time, so it grows while a handler
// stalls.
type unhandled struct {
	mu     sync.Mutex
	by     map[topicPartition][]fetchedAt
	topics map[string]bool // every topic seen, reported as 0 when nothing is outstanding
}

type fetchedAt struct {
	offset int64
	at     time.Time // broker timestamp (fetch time if the record has none)
}

func (u *unhandled) add(km kafka.Message) {
	at := km.Time
	if at.IsZero() {
		at = time.Now()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.by == nil {
		u.by, u.topics = map[topicPartition][]fetchedAt{}, map[string]bool{}
	}
	tp := topicPartition{km.Topic, km.Partition}
	u.by[tp] = append(u.by[tp], fetchedAt{km.Offset, at})
	u.topics[km.Topic] = true
}

// committed drops every message at or below the newest committed offset of each
// partition of batch.
func (u *unhandled) committed(batch []kafka.Message) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, km := range newestPerPartition(batch) {
		tp := topicPartition{km.Topic, km.Partition}
		q := u.by[tp]
		i := 0
		for i < len(q) && q[i].offset <= km.Offset {
			i++
		}
		if i == len(q) {
			delete(u.by, tp)
			continue
		}
		u.by[tp] = q[i:]
	}
}

// reset forgets what is outstanding: Run has ended (its leftovers wait for the next
// Run, which fetches nothing new meanwhile).
func (u *unhandled) reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	clear(u.by)
}

// oldest returns, per topic seen, the broker timestamp of the oldest outstanding
// message (the first of each partition), or the zero time if there is none.
func (u *unhandled) oldest() map[string]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]time.Time, len(u.topics))
	for topic := range u.topics {
		out[topic] = time.Time{}
	}
	for tp, q := range u.by {
		if t := out[tp.topic]; t.IsZero() || q[0].at.Before(t) {
			out[tp.topic] = q[0].at
		}
	}
	return out
}
