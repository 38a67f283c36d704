package replay

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/outbox-operator/outbox-operator/internal/backoff"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/health"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/metrics"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardrelay"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardstore"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/testenv/kafkatest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

const v2Shards = 8

var (
	brokerOnce sync.Once
	broker     *kafkatest.Broker
	brokerErr  error
)

// kafka is one kfake cluster for the package's v2 tests (the v1 tests need none).
func kafka(t *testing.T) *kafkatest.Broker {
	t.Helper()
	brokerOnce.Do(func() { broker, brokerErr = kafkatest.Start(3) })
	if brokerErr != nil {
		t.Fatal(brokerErr)
	}
	return broker
}

// v2Table is a migrated v2 table (public.outbox_event, the replayer's default) in a
// database of its own.
func v2Table(t *testing.T) (string, *sql.DB) {
	t.Helper()
	dsn, db := relaytest.PG.OpenDatabase(t)
	if err := schema.MigrateV2(context.Background(), db, relaytest.DefaultTable, schema.V2Options{Shards: v2Shards}); err != nil {
		t.Fatal(err)
	}
	return dsn, db
}

// insertV2 inserts one event per id (its own aggregate, version 1) to topic, created
// an hour ago (past any unknown-topic grace), as a producer's plain INSERT.
func insertV2(t *testing.T, db *sql.DB, topic, eventType string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := db.Exec(`INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
			destination, message_key, payload, created_at) VALUES ($1, 'Order', $1, 1, $2, $3, $1, '{}', now() - interval '1 hour')`,
			id, eventType, topic); err != nil {
			t.Fatal(err)
		}
	}
}

// runV2Relay runs a real v2 relay loop (shardrelay) on db's table against the kfake
// cluster until the test ends.
func runV2Relay(t *testing.T, dsn string) {
	t.Helper()
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	st, err := shardstore.New(db, shardstore.Options{Table: relaytest.DefaultTable, Shards: v2Shards, WorkerID: "w1", Lease: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := publish.New(publish.Options{Brokers: kafka(t).Addrs(), BatchSize: 50, WriteTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := shardrelay.New(shardrelay.Options{
		Table: relaytest.DefaultTable, WorkerID: "w1", BatchSize: 50, Lease: 6 * time.Second, PollInterval: 100 * time.Millisecond,
		MaxAttempts: 3, Backoff: backoff.Policy{Min: 50 * time.Millisecond, Max: 200 * time.Millisecond},
		UnknownTopicGrace: time.Minute, ShutdownTimeout: 5 * time.Second, StatsInterval: time.Second,
	}, db, st, pub, metrics.New("test"), health.New(time.Minute), logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
		_ = st.Close()
		_ = pub.Close()
		_ = db.Close()
	})
}

// holdRows is the hold table as "event_id:STATE:code" in event id order.
func holdRows(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT event_id || ':' || state || ':' || COALESCE(last_error_code, '') FROM outbox_event_hold ORDER BY event_id`)
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
	return out
}

// DEAD hold rows of a v2 table, replayed: while their topic is still missing the
// canary goes DEAD again and stops the replay (the rest untouched); once the topic
// exists a new replay sends them all through the v2 relay (the hold rows go), with
// their original ids, and leaves the DEAD row the selector does not match alone.
func TestV2ReplayCanaryThenPublishesDeadHoldRows(t *testing.T) {
	dsn, db := v2Table(t)
	b := kafka(t)
	tp := fmt.Sprintf("replay-v2-%d", time.Now().UnixNano())
	var ids []string
	for i := 0; i < 6; i++ {
		ids = append(ids, fmt.Sprintf("paid-%d", i))
	}
	insertV2(t, db, tp, "OrderPaid", ids...)
	insertV2(t, db, tp, "OrderShipped", "shipped-0") // DEAD too; not selected
	runV2Relay(t, dsn)
	relaytest.Eventually(t, 30*time.Second, "seven DEAD hold rows", func() bool {
		return count(t, db, `SELECT count(*) FROM outbox_event_hold WHERE state = 'DEAD' AND last_error_code = $1`, publish.CodeTopicNotFound) == 7
	})

	var before time.Time
	if err := db.QueryRow(`SELECT clock_timestamp()`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	sel := Selector{EventType: "OrderPaid", ErrorCode: publish.CodeTopicNotFound}
	r := replayer(t, db, func(o *Options) { o.ReplayID, o.Selector, o.CanarySize, o.MaxNewDeadPercent = "v2-r1", sel, 2, 10 })
	res, err := r.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "canary") {
		t.Fatalf("err = %v, want the canary's failure", err)
	}
	if res.Phase != PhaseFailed || res.Matched != 6 || res.Replayed != 2 || res.DeadAgain != 2 {
		t.Fatalf("canary result %+v", res)
	}
	if n := count(t, db, `SELECT count(*) FROM outbox_event_hold WHERE state = 'DEAD' AND updated_at < $1`, before); n != 5 {
		t.Fatalf("%d DEAD rows untouched by the failed replay, want 5 (4 after the canary and the unselected one)", n)
	}

	if err := b.CreateTopic(tp, 3); err != nil {
		t.Fatal(err)
	}
	// A fresh event (inside the unknown-topic grace) on the topic: once it arrived, the
	// relay's producer knows the topic exists (as it would by the time an operator
	// replays after fixing a topic).
	if _, err := db.Exec(`INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
		destination, message_key, payload) VALUES ('probe', 'Probe', 'probe', 1, 'Probe', $1, 'probe', '{}')`, tp); err != nil {
		t.Fatal(err)
	}
	relaytest.Eventually(t, 30*time.Second, "the probe event on the new topic", func() bool { return b.Count(tp) == 1 })
	r = replayer(t, db, func(o *Options) { o.ReplayID, o.Selector, o.CanarySize, o.Rate = "v2-r2", sel, 2, 1000 })
	res, err = r.Run(context.Background())
	if err != nil || res.Phase != PhaseSucceeded || res.Matched != 6 || res.Replayed != 6 || res.Succeeded != 6 || res.DeadAgain != 0 {
		t.Fatalf("replay: %+v %v", res, err)
	}
	if got := strings.Join(holdRows(t, db), " "); got != "shipped-0:DEAD:"+publish.CodeTopicNotFound {
		t.Fatalf("hold table after the replay: %s", got)
	}
	recs, err := b.ReadAllWithin(30*time.Second, tp, 7)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rec := range recs {
		for _, h := range rec.Headers {
			if h.Key == "event_id" && string(h.Value) != "probe" {
				got = append(got, string(h.Value))
			}
		}
	}
	sort.Strings(got)
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("topic holds %v, want %v", got, ids)
	}
	if a := audit(t, db, "v2-r2"); a.phase != PhaseSucceeded || a.succeeded != 6 || !a.finished {
		t.Fatalf("audit %+v", a)
	}
}

func count(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// deadHoldRows writes hold rows straight from the outbox rows of ids (as the v2
// relay's advance does) in state, with code.
func deadHoldRows(t *testing.T, db *sql.DB, state, code string, ids ...string) {
	t.Helper()
	if _, err := db.Exec(`INSERT INTO outbox_event_hold (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
		event_version, destination, message_key, payload, headers, created_at, txid, seq, shard, state, attempts, last_error_code, last_error_message)
		SELECT event_id, aggregate_type, aggregate_id, aggregate_version, event_type, event_version, destination, message_key,
		       payload, headers, created_at, txid, seq, shard, $1, 3, $2, 'broker said no'
		FROM outbox_event WHERE event_id = ANY($3)`, state, code, "{"+strings.Join(ids, ",")+"}"); err != nil {
		t.Fatal(err)
	}
}

// A selector on a v2 table matches the DEAD hold rows it names and nothing else: not
// a RETRY or HELD row, not a DEAD row another filter excludes.
func TestV2SelectorsMatchOnlyTheirDeadHoldRows(t *testing.T) {
	_, db := v2Table(t)
	insertV2(t, db, "orders", "OrderPaid", "a", "b", "c", "retry", "held")
	insertV2(t, db, "payments", "OrderPaid", "d")
	insertV2(t, db, "orders", "OrderShipped", "e")
	if _, err := db.Exec(`INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
		destination, message_key, payload) VALUES ('new', 'Order', 'new', 1, 'OrderPaid', 'orders', 'new', '{}')`); err != nil {
		t.Fatal(err)
	}
	deadHoldRows(t, db, schema.StatusDead, "TOPIC_NOT_FOUND", "a", "b", "d", "e", "new")
	deadHoldRows(t, db, schema.StatusDead, "MESSAGE_TOO_LARGE", "c")
	deadHoldRows(t, db, schema.StatusRetry, "TOPIC_NOT_FOUND", "retry")
	deadHoldRows(t, db, schema.StatusHeld, "TOPIC_NOT_FOUND", "held")
	halfHourAgo := time.Now().Add(-30 * time.Minute)
	// A table made by an earlier v2 migrate, without the audit table: one line.
	if _, err := db.Exec(`DROP TABLE outbox_event_replay_audit`); err != nil {
		t.Fatal(err)
	}
	err := replayer(t, db, func(o *Options) {}).verify(context.Background())
	if err == nil || !strings.Contains(err.Error(), "has no replay audit table") {
		t.Fatalf("verify without the audit table: %v", err)
	}
	if err := schema.MigrateV2(context.Background(), db, relaytest.DefaultTable, schema.V2Options{Shards: v2Shards}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		sel  Selector
		want string
	}{
		{"everything", Selector{}, "a b c d e new"},
		{"ids", Selector{EventIDs: []string{"b", "retry", "e"}}, "b e"},
		{"event type", Selector{EventType: "OrderShipped"}, "e"},
		{"error code", Selector{ErrorCode: "MESSAGE_TOO_LARGE"}, "c"},
		{"destination and type", Selector{Destination: "orders", EventType: "OrderPaid"}, "a b c new"},
		{"aggregate", Selector{AggregateType: "Order", AggregateID: "d"}, "d"},
		{"created after", Selector{CreatedAfter: &halfHourAgo}, "new"},
		{"created before", Selector{CreatedBefore: &halfHourAgo, ErrorCode: "TOPIC_NOT_FOUND"}, "a b d e"},
		{"no match", Selector{EventType: "Nope"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := replayer(t, db, func(o *Options) { o.Selector = c.sel })
			if err := r.verify(context.Background()); err != nil {
				t.Fatal(err)
			}
			ids, err := r.match(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(ids)
			if got := strings.Join(ids, " "); got != c.want {
				t.Fatalf("matched %q, want %q", got, c.want)
			}
		})
	}
}

// The hand-back on a v2 table keeps --rate (11 rows at 10 per second: the last goes
// back at least a second after the first) and leaves each row as the relay's
// DueHolds wants it: RETRY, attempts 0, due now, the old error named. No relay runs,
// so the settle gives up and the replay stays Running, resumable.
func TestV2HandBackKeepsTheRateAndResetsAttempts(t *testing.T) {
	_, db := v2Table(t)
	var ids []string
	for i := 0; i < 11; i++ {
		ids = append(ids, fmt.Sprintf("r%02d", i))
	}
	insertV2(t, db, "orders", "OrderPaid", ids...)
	deadHoldRows(t, db, schema.StatusDead, "TOPIC_NOT_FOUND", ids...)
	r := replayer(t, db, func(o *Options) {
		o.ReplayID, o.CanarySize, o.Rate, o.SettleTimeout = "v2-rate", 0, 10, 100*time.Millisecond
	})
	if _, err := r.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "still in flight") {
		t.Fatalf("err = %v, want the settle to give up", err)
	}
	var spread float64
	var due, reset int
	if err := db.QueryRow(`SELECT EXTRACT(epoch FROM max(updated_at) - min(updated_at)),
		count(*) FILTER (WHERE next_attempt_at <= now()),
		count(*) FILTER (WHERE state = 'RETRY' AND attempts = 0 AND last_error_code = 'REPLAYED'
		                   AND last_error_message = 'replay v2-rate after TOPIC_NOT_FOUND: broker said no')
		FROM outbox_event_hold`).Scan(&spread, &due, &reset); err != nil {
		t.Fatal(err)
	}
	if spread < 0.95 {
		t.Fatalf("11 rows handed back within %.2fs at 10 per second", spread)
	}
	if due != 11 || reset != 11 {
		t.Fatalf("%d rows due, %d reset to RETRY with attempts 0; want 11 each", due, reset)
	}
	if a := audit(t, db, "v2-rate"); a.phase != PhaseRunning || a.replayed != 11 {
		t.Fatalf("audit %+v", a)
	}
}

// A v1 table upgraded to v2 (migrate --contract v2 copies its DEAD rows into the hold
// table): the replay selects those copies, and the status view shows them DEAD
// although their outbox rows stayed in the v1 table set aside.
func TestV2ReplaySelectsDeadRowsOfAnUpgradedTable(t *testing.T) {
	db, _ := setup(t) // a v1 table
	dead(t, db, 3, "OrderPaid", "TOPIC_NOT_FOUND")
	dead(t, db, 1, "Other", "MESSAGE_TOO_LARGE")
	if err := schema.MigrateV2(context.Background(), db, relaytest.DefaultTable, schema.V2Options{Shards: v2Shards}); err != nil {
		t.Fatal(err)
	}
	r := replayer(t, db, func(o *Options) { o.ReplayID, o.Selector.ErrorCode, o.DryRun = "v2-upgraded", "TOPIC_NOT_FOUND", true })
	res, err := r.Run(context.Background())
	if err != nil || res.Matched != 3 || res.Phase != PhaseSucceeded {
		t.Fatalf("dry run on the upgraded table: %+v %v", res, err)
	}
	if n := count(t, db, `SELECT count(*) FROM outbox_event_status WHERE status = 'DEAD' AND attempts = 12`); n != 4 {
		t.Fatalf("%d DEAD events with their 12 attempts in the status view, want 4", n)
	}
}
