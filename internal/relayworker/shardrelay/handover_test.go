package shardrelay_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// A worker joins while a NOTIFY-triggered trickle of single-event transactions runs:
// the first worker releases half its shards at its next lease round, and the joining
// worker takes them at once, not at its own next round. The poll interval is 30 s
// and the lease 30 s (rounds every 10 s), and the second worker starts 5 s after the
// first: before the fix the released shards had no owner for about 5 s (the joiner's
// next round), so an event that waited for it is unmistakable against the 3 s bound,
// while a NOTIFY-woken worker publishes in milliseconds. Issue 21's latency bench saw
// this as second-long stalls (a poll interval of 1 s bounded the joiner's round).
func TestJoiningWorkerTakesReleasedShardsAtOnce(t *testing.T) {
	dsn, db := newTable(t)
	for _, stmt := range schema.NotifyTriggerStatements(tb) {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	tp := topic(t)
	o := opts{poll: 30 * time.Second, lease: 30 * time.Second}
	start(t, dsn, "w1", o)
	relaytest.Eventually(t, 30*time.Second, "w1 to hold every shard", func() bool {
		return count(t, db, `SELECT count(*) FROM outbox_v2_shard WHERE owner IS NOT NULL`) == shards
	})
	var mu sync.Mutex
	committed := map[string]time.Time{}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for p := 0; p < 2; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("p%d-%d", p, i)
				if _, err := db.Exec(`INSERT INTO outbox_v2 (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
    destination, message_key, payload) VALUES ($1, 'order', $1, 1, 'order.changed', $2, $1, '{}')`, id, tp); err != nil {
					t.Errorf("insert %s: %v", id, err)
					return
				}
				mu.Lock()
				committed[id] = time.Now()
				mu.Unlock()
				time.Sleep(time.Duration(2+i%7) * time.Millisecond)
			}
		}()
	}
	time.Sleep(5 * time.Second) // the middle of w1's lease round cadence (10 s)
	start(t, dsn, "w2", o)
	relaytest.Eventually(t, 30*time.Second, "w2 to hold half the shards", func() bool {
		return count(t, db, `SELECT count(*) FROM outbox_v2_shard WHERE split_part(owner, '/', 1) = 'w2'`) == shards/2
	})
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	n := len(committed)
	mu.Unlock()
	recs, err := broker.ReadAllWithin(60*time.Second, tp, n)
	if err != nil {
		t.Fatalf("read %d of %d: %v", len(recs), n, err)
	}
	var worst time.Duration
	late := 0
	for _, r := range recs {
		lat := r.Timestamp.Sub(committed[header(r, "event_id")])
		worst = max(worst, lat)
		if lat > 3*time.Second {
			late++
		}
	}
	t.Logf("%d events, worst commit-to-produce %s", len(recs), worst)
	if late > 0 {
		t.Fatalf("%d of %d events waited more than 3 s (worst %s): released shards waited for the joiner's lease round", late, len(recs), worst)
	}
}

// A worker that joins asks the others for a lease round (schema.LeasesWanted), so it
// holds its share within moments, not at the next round of the worker that holds
// everything (lease/3 = 10 s here, 8-10 s after w2 starts). Before, the two workers
// of the latency bench started together, one took all 256 shards and carried the
// whole load for 10 s while the other stood idle.
func TestJoiningWorkerAsksForItsShareAtOnce(t *testing.T) {
	dsn, db := newTable(t)
	o := opts{poll: 30 * time.Second, lease: 30 * time.Second}
	start(t, dsn, "w1", o)
	relaytest.Eventually(t, 30*time.Second, "w1 to hold every shard", func() bool {
		return count(t, db, `SELECT count(*) FROM outbox_v2_shard WHERE owner IS NOT NULL`) == shards
	})
	joined := time.Now()
	start(t, dsn, "w2", o)
	relaytest.Eventually(t, 30*time.Second, "w2 to hold half the shards", func() bool {
		return count(t, db, `SELECT count(*) FROM outbox_v2_shard WHERE split_part(owner, '/', 1) = 'w2'`) == shards/2
	})
	took := time.Since(joined)
	t.Logf("w2 held its share %s after it started", took.Round(time.Millisecond))
	if took > 4*time.Second {
		t.Fatalf("w2 held its share %s after it started: it waited for w1's next lease round", took)
	}
}

// Workers under their share ask for shards only from a round of their own schedule
// (a poll interval apart), never from a round another's request started: with the
// worker over its share stopped (here a live worker row and every shard under a
// long lease, nobody answering), two joiners must not wake each other in a loop.
func TestWorkersUnderTheirShareDoNotWakeEachOtherInALoop(t *testing.T) {
	dsn, db := newTable(t)
	if _, err := db.Exec(`INSERT INTO outbox_v2_workers (worker_id) VALUES ('stopped')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE outbox_v2_lease SET owner = 'stopped/1';
INSERT INTO outbox_v2_token (token, lease_until) VALUES ('stopped/1', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	l := pq.NewListener(dsn, 100*time.Millisecond, time.Second, nil)
	t.Cleanup(func() { _ = l.Close() })
	if err := l.Listen(schema.Channel(tb)); err != nil {
		t.Fatal(err)
	}
	o := opts{poll: 200 * time.Millisecond, lease: 30 * time.Second}
	start(t, dsn, "w2", o)
	start(t, dsn, "w3", o)
	wanted := 0
	for end := time.After(3 * time.Second); ; {
		select {
		case n := <-l.Notify:
			if n != nil && n.Extra == schema.LeasesWanted {
				wanted++
			}
			continue
		case <-end:
		}
		break
	}
	// Each asks at most once per poll interval: about 2 x 15 in 3 s.
	t.Logf("%d requests for shards in 3 s", wanted)
	if wanted == 0 || wanted > 40 {
		t.Fatalf("%d requests for shards in 3 s from two workers with a 200 ms poll interval: want 1-40", wanted)
	}
}
