package fault

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// hotOwner is the worker id holding the shard of the table's events (one shard: all
// of them are one aggregate's) under a live lease; "" while nobody holds it.
func hotOwner(t *testing.T, db *sql.DB) string {
	t.Helper()
	var owner string
	err := db.QueryRow(`SELECT split_part(owner, '/', 1) FROM public.outbox_event_shard
WHERE shard = (SELECT shard FROM public.outbox_event LIMIT 1) AND owner IS NOT NULL AND lease_until > now()`).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return owner
}

// One hot shard: every event is a version of one aggregate, two v2 workers, small
// batches (20: a window often holds more and is read in parts) by one owner while the
// other worker idles. The owner stops gracefully mid-stream (its shard freed, with the
// window's position if it was read in parts) and the other goes on from there. Every version reaches Kafka exactly in order.
func TestV2HotShardOneAggregate(t *testing.T) {
	dsn, db := v2Table(t, "16")
	tp := newTopic(t, "v2hot")
	flags := []string{"--lease=3s", "--batch-size=20"}
	ws := map[string]*worker{
		"v2hot-1": startWorker(t, "v2hot-1", dsn, flags...),
		"v2hot-2": startWorker(t, "v2hot-2", dsn, flags...),
	}
	for _, w := range ws {
		w.waitReady(t)
	}
	prod := startProducer(t, db, tp, 1) // one aggregate: two versions per transaction
	relaytest.Eventually(t, 30*time.Second, "300 versions relayed", func() bool { return broker.Count(tp) >= 300 })
	owner := hotOwner(t, db)
	if ws[owner] == nil {
		t.Fatalf("the hot shard's owner is %q, not one of the workers", owner)
	}
	ws[owner].Stop(t)
	stopped := time.Now()
	var next string
	relaytest.Eventually(t, 10*time.Second, "the other worker holding the hot shard", func() bool {
		next = hotOwner(t, db)
		return next != "" && next != owner
	})
	t.Logf("%s stopped; %s took the hot shard %s later", owner, next, time.Since(stopped).Round(10*time.Millisecond))
	at := broker.Count(tp)
	relaytest.Eventually(t, 30*time.Second, "300 more versions relayed by the other worker", func() bool { return broker.Count(tp) >= at+300 })
	prod.Stop(t)

	d := verifyV2(t, db, tp, 30*time.Second)
	t.Logf("%d versions of one aggregate, %d records, %d duplicates", d.events, d.records, d.duplicates)
	// A graceful stop publishes and advances its batch before it frees the shard.
	if d.duplicates != 0 {
		t.Errorf("%d duplicates after a graceful hand-over", d.duplicates)
	}
	checkSurvived(t, 3, ws[next])
	ws[next].Stop(t)
}
