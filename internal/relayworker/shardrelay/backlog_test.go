package shardrelay_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/kafkatest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// The backlog gauges of a v2 worker mean what they mean on v1: outbox_pending_count
// is the events not yet published (rows in the shards' open windows while the
// brokers refuse every write; a RETRY hold row and the HELD version behind it), and
// outbox_oldest_pending_age_seconds how long the oldest of them has waited; both
// fall to 0 once everything is published.
func TestBacklogGaugesFollowTheWindowsAndTheHoldTable(t *testing.T) {
	dsn, db := newTable(t)
	tp := topic(t)
	refusal := broker.RefuseProduce(kafkatest.ErrNotEnoughReplicas, tp)
	defer refusal.Stop()
	var evs []ev
	for a := 0; a < 2; a++ {
		for v := 1; v <= 4; v++ {
			evs = append(evs, ev{agg: fmt.Sprintf("b%d", a), version: v, topic: tp, age: 90 * time.Second})
		}
	}
	insert(t, db, evs...)
	w := start(t, dsn, "w1", opts{})
	gauges := func() string {
		return fmt.Sprintf("pending %v, oldest %.0fs", metric(w.m, "outbox_pending_count"), metric(w.m, "outbox_oldest_pending_age_seconds"))
	}
	relaytest.Eventually(t, 30*time.Second, "8 pending, the oldest 90 s old, while the brokers refuse", func() bool {
		return metric(w.m, "outbox_broker_up") == 0 && metric(w.m, "outbox_pending_count") == 8 &&
			metric(w.m, "outbox_oldest_pending_age_seconds") >= 90
	})
	if h := holds(t, db); len(h) != 0 {
		t.Fatalf("hold rows while paused: %v (the 8 must be counted from the windows)", h)
	}

	refusal.Set(false)
	relaytest.Eventually(t, 30*time.Second, "everything published and the gauges at 0", func() bool {
		return broker.Count(tp) >= 8 && metric(w.m, "outbox_pending_count") == 0 && metric(w.m, "outbox_oldest_pending_age_seconds") == 0
	})

	missing := fmt.Sprintf("not-yet-%d", topicSeq.Add(1))
	insert(t, db, ev{agg: "m", version: 1, topic: missing, age: 30 * time.Second}, ev{agg: "m", version: 2, topic: tp})
	relaytest.Eventually(t, 30*time.Second, "m-v1 RETRY, m-v2 HELD, both counted, the oldest 30 s old (within the unknown-topic grace)", func() bool {
		return strings.Join(holds(t, db), " ") == "m-v1:RETRY m-v2:HELD" &&
			metric(w.m, "outbox_pending_count") == 2 && metric(w.m, "outbox_oldest_pending_age_seconds") >= 30
	})
	t.Logf("with a retry held: %s", gauges())
}
