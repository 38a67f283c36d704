package shardrelay_test

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/testenv/kafkatest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// statuses is outbox_v2_status as "event_id:STATUS" plus ":code" for a hold row, in
// (aggregate, version) order.
func statuses(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.Query(`SELECT event_id || ':' || status || COALESCE(':' || last_error_code, '') || CASE WHEN attempts > 0 THEN ':tried' ELSE '' END
		FROM outbox_v2_status ORDER BY aggregate_id, aggregate_version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, " ")
}

// logged checks the batch log against what Kafka holds: every record (want per topic)
// is found at its partition and offset through its event's seq, as kubectl outbox
// trace finds it: window publishes in a row of their shard, sends from the hold table
// in a row of no shard.
func logged(t *testing.T, db *sql.DB, want map[string]int) {
	t.Helper()
	for tp, n := range want {
		recs, err := broker.ReadAllWithin(30*time.Second, tp, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			id := header(rec, "event_id")
			var part, off int64
			err := db.QueryRow(`SELECT b.partitions[array_position(b.seqs, o.seq)], b.offsets[array_position(b.seqs, o.seq)]
				FROM outbox_v2 o JOIN outbox_v2_batch b ON o.seq = ANY (b.seqs) AND (o.shard = ANY (b.shards) OR b.shards = '{}')
				WHERE o.event_id = $1`, id).Scan(&part, &off)
			if err != nil {
				t.Fatalf("%s in the batch log: %v", id, err)
			}
			if part != int64(rec.Partition) || off != rec.Offset {
				t.Fatalf("%s: batch log says partition %d offset %d, Kafka %d/%d", id, part, off, rec.Partition, rec.Offset)
			}
		}
	}
	if n := count(t, db, `SELECT count(*) FROM outbox_v2_batch WHERE shards = '{}'`); n < 1 {
		t.Fatalf("no batch log row of the hold table's sends")
	}
}

// The status view against a real relay run: PENDING before it, then SENT for what
// Kafka stored, RETRY (tried, with its code) and HELD behind it for a refused topic,
// DEAD for a message too large; SENT for the retried ones once the topic takes
// writes, each record logged at its partition and offset; and PENDING for an event
// inserted after the worker stopped.
func TestStatusViewFollowsARelayRun(t *testing.T) {
	dsn, db := newTable(t)
	bad, good := topic(t), topic(t)
	refusal := broker.RefuseProduce(kafkatest.ErrNotEnoughReplicas, bad)
	defer refusal.Stop()
	big := `{"s":"` + strings.Repeat("x", 20_000) + `"}`
	insert(t, db, ev{agg: "a", version: 1, topic: good}, ev{agg: "a", version: 2, topic: good},
		ev{agg: "b", version: 1, topic: good, payload: big}, ev{agg: "b", version: 2, topic: good},
		ev{agg: "c", version: 1, topic: bad}, ev{agg: "c", version: 2, topic: bad})
	if got := statuses(t, db); got != "a-v1:PENDING a-v2:PENDING b-v1:PENDING b-v2:PENDING c-v1:PENDING c-v2:PENDING" {
		t.Fatalf("before the relay: %s", got)
	}
	w := start(t, dsn, "w1", opts{maxBytes: 10_000})
	want := "a-v1:SENT a-v2:SENT b-v1:DEAD:" + publish.CodeMessageTooLarge + " b-v2:SENT c-v1:RETRY:" + publish.CodeNotEnoughReplicas + ":tried c-v2:HELD"
	relaytest.Eventually(t, 30*time.Second, "the view to say "+want, func() bool { return statuses(t, db) == want })
	if n := broker.Count(good); n != 3 {
		t.Fatalf("%d records on the working topic, want the 3 the view calls SENT", n)
	}
	refusal.Set(false)
	relaytest.Eventually(t, 30*time.Second, "c's versions SENT", func() bool {
		return strings.HasSuffix(statuses(t, db), "c-v1:SENT c-v2:SENT")
	})
	if n := broker.Count(bad); n != 2 {
		t.Fatalf("%d records on the once refused topic, want 2", n)
	}
	logged(t, db, map[string]int{good: 3, bad: 2})
	w.stop(t)
	insert(t, db, ev{agg: "d", version: 1, topic: good})
	if got := statuses(t, db); !strings.HasSuffix(got, "d-v1:PENDING") {
		t.Fatalf("after the worker stopped: %s", got)
	}
}
