package relay_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-operator/outbox-operator/internal/backoff"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/health"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/metrics"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/relay"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
	"github.com/outbox-operator/outbox-operator/internal/testenv/kafkatest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/logtest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

var broker *kafkatest.Broker

func TestMain(m *testing.M) {
	b, err := kafkatest.Start(3)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	broker = b
	defer b.Close()
	relaytest.Main(m)
}

var topicSeq atomic.Int64

// topic creates a fresh topic with 3 partitions.
func topic(t *testing.T) string {
	name := fmt.Sprintf("t%d", topicSeq.Add(1))
	if err := broker.CreateTopic(name, 3); err != nil {
		t.Fatal(err)
	}
	return name
}

type worker struct {
	r      *relay.Relay
	m      *metrics.Metrics
	h      *health.State
	st     *store.Store
	cancel context.CancelFunc
	done   chan error
}

type opts struct {
	batch       int
	lease       time.Duration
	poll        time.Duration
	maxAttempts int
	minBackoff  time.Duration
	maxBackoff  time.Duration // default 2s
	grace       time.Duration
	log         *logtest.Lines // nil: discarded
	pub         func(relay.Publisher) relay.Publisher
	noListen    bool
	probe       func(context.Context) (bool, error)
	brokers     []string
	format      publish.Format // zero: native
}

func newWorker(t *testing.T, dsn string, db *sql.DB, id string, o opts) *worker {
	t.Helper()
	if o.batch == 0 {
		o.batch = 100
	}
	if o.lease == 0 {
		o.lease = 10 * time.Second
	}
	if o.poll == 0 {
		o.poll = 200 * time.Millisecond
	}
	if o.maxAttempts == 0 {
		o.maxAttempts = 5
	}
	if o.minBackoff == 0 {
		o.minBackoff = 50 * time.Millisecond
	}
	if o.maxBackoff == 0 {
		o.maxBackoff = 2 * time.Second
	}
	if o.grace == 0 {
		o.grace = time.Minute
	}
	log := logr.Discard()
	if o.log != nil {
		log = o.log.Logger()
	}
	if o.brokers == nil {
		o.brokers = broker.Addrs()
	}
	st, err := store.New(context.Background(), db, store.Options{Table: relaytest.DefaultTable})
	if err != nil {
		t.Fatal(err)
	}
	p, err := publish.New(publish.Options{Brokers: o.brokers, BatchSize: o.batch, WriteTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var pub relay.Publisher = p
	if o.pub != nil {
		pub = o.pub(p)
	}
	listenDSN := dsn
	if o.noListen {
		listenDSN = ""
	}
	m := metrics.New("test")
	h := health.New(time.Minute)
	r := relay.New(relay.Options{
		Table: relaytest.DefaultTable, DSN: listenDSN, WorkerID: id, BatchSize: o.batch,
		Lease: o.lease, PollInterval: o.poll, MaxAttempts: o.maxAttempts,
		Backoff:           backoff.Policy{Min: o.minBackoff, Max: o.maxBackoff},
		UnknownTopicGrace: o.grace, ShutdownTimeout: 5 * time.Second, StatsInterval: 100 * time.Millisecond,
		Format: o.format,
	}, db, st, pub, m, h, log)
	if o.probe != nil {
		r.SetPrimaryProbe(o.probe)
	}
	return &worker{r: r, m: m, h: h, st: st, done: make(chan error, 1)}
}

func (w *worker) start(t *testing.T) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- w.r.Run(ctx) }()
	t.Cleanup(func() { w.stop(t) })
	return w
}

func (w *worker) stop(t *testing.T) {
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.cancel = nil
	select {
	case err := <-w.done:
		if err != nil {
			t.Errorf("worker returned %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("worker did not stop within 20s")
	}
}

func waitStatus(t *testing.T, db *sql.DB, status string, n int, within time.Duration) {
	t.Helper()
	relaytest.Eventually(t, within, fmt.Sprintf("%d rows %s", n, status), func() bool {
		return relaytest.CountStatus(t, db)[status] == n
	})
}

func header(r *kgo.Record, k string) string {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

func TestRelayPublishesContractMessages(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	h := `{"traceparent":"00-abc","tenant":"t1"}`
	relaytest.Insert(t, db, relaytest.Ev{ID: "ev-1", AggType: "order", AggID: "o-1", Version: 1, Topic: tp, Payload: `{"amount": 10}`, Headers: &h})
	newWorker(t, dsn, db, "w1", opts{}).start(t)
	waitStatus(t, db, "SENT", 1, 10*time.Second)
	recs, err := broker.ReadAllWithin(10*time.Second, tp, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := recs[0]
	if string(r.Key) != "o-1" || string(r.Value) != `{"amount": 10}` {
		t.Fatalf("key %q value %q", r.Key, r.Value)
	}
	want := map[string]string{"event_id": "ev-1", "event_type": "test.event", "event_version": "1", "aggregate_type": "order",
		"aggregate_id": "o-1", "aggregate_version": "1", "traceparent": "00-abc", "tenant": "t1"}
	for k, v := range want {
		if got := header(r, k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	// Partition follows the Murmur2 key hash (as the Java client would choose).
	wantPart := (&kafka.Murmur2Balancer{}).Balance(kafka.Message{Key: []byte("o-1")}, 0, 1, 2)
	if int(r.Partition) != wantPart {
		t.Errorf("partition %d, want murmur2 %d", r.Partition, wantPart)
	}
	var part, off sql.NullInt64
	if err := db.QueryRow(`SELECT broker_partition, broker_offset FROM outbox_event WHERE event_id='ev-1'`).Scan(&part, &off); err != nil {
		t.Fatal(err)
	}
	if !part.Valid || part.Int64 != int64(r.Partition) || !off.Valid || off.Int64 != r.Offset {
		t.Errorf("broker_partition/offset %v/%v, want %d/%d", part, off, r.Partition, r.Offset)
	}
}

// Many workers: every event reaches Kafka, none twice (no lease expires here).
func TestManyWorkersNoDoubleSend(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	const n = 3000
	relaytest.Insert(t, db, relaytest.Many("e", tp, n)...)
	for i := 0; i < 4; i++ {
		newWorker(t, dsn, db, "w"+strconv.Itoa(i), opts{batch: 50}).start(t)
	}
	waitStatus(t, db, "SENT", n, 60*time.Second)
	recs, err := broker.ReadAllWithin(20*time.Second, tp, n)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range recs {
		seen[header(r, "event_id")]++
	}
	time.Sleep(200 * time.Millisecond)
	if c := broker.Count(tp); c != n || len(seen) != n {
		t.Fatalf("topic holds %d records, %d distinct; want %d each (a claimed row was published twice?)", c, len(seen), n)
	}
}

// Per-aggregate order holds with 3 workers racing over interleaved versions.
func TestPerAggregateOrderThreeWorkers(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	const aggs, versions = 30, 20
	var evs []relaytest.Ev
	for v := 1; v <= versions; v++ {
		for a := 0; a < aggs; a++ {
			evs = append(evs, relaytest.Ev{ID: fmt.Sprintf("a%d-v%d", a, v), AggID: fmt.Sprintf("agg-%d", a), Version: int64(v), Topic: tp})
		}
	}
	// Insert in several transactions so versions arrive over time while workers run.
	for i := 0; i < 3; i++ {
		newWorker(t, dsn, db, "w"+strconv.Itoa(i), opts{batch: 17}).start(t)
	}
	for i := 0; i < len(evs); i += 60 {
		relaytest.Insert(t, db, evs[i:min(i+60, len(evs))]...)
	}
	waitStatus(t, db, "SENT", len(evs), 60*time.Second)
	recs, err := broker.ReadAllWithin(20*time.Second, tp, len(evs))
	if err != nil {
		t.Fatal(err)
	}
	checkAggregateOrder(t, recs)
}

// Permanent errors and bad rows go DEAD with a code, without blocking the batch.
func TestDeadWithCodes(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	badHeaders := `{"n": 1}`
	arrHeaders := `["x"]`
	big := `{"x":"` + string(make([]byte, 0)) + randomString(2<<20) + `"}`
	relaytest.Insert(t, db,
		relaytest.Ev{ID: "ok", AggID: "a1", Version: 1, Topic: tp},
		relaytest.Ev{ID: "hdr", AggID: "a2", Version: 1, Topic: tp, Headers: &badHeaders},
		relaytest.Ev{ID: "hdr2", AggID: "a3", Version: 1, Topic: tp, Headers: &arrHeaders},
		relaytest.Ev{ID: "big", AggID: "a4", Version: 1, Topic: tp, Payload: big},
		relaytest.Ev{ID: "nodest", AggID: "a5", Version: 1, Topic: ""},
		relaytest.Ev{ID: "badtopic", AggID: "a6", Version: 1, Topic: "no spaces/allowed"},
		relaytest.Ev{ID: "after-big", AggID: "a4", Version: 2, Topic: tp},
	)
	newWorker(t, dsn, db, "w", opts{}).start(t)
	waitStatus(t, db, "DEAD", 5, 10*time.Second)
	waitStatus(t, db, "SENT", 2, 10*time.Second)
	want := map[string]string{"hdr": "INVALID_HEADERS", "hdr2": "INVALID_HEADERS", "big": "MESSAGE_TOO_LARGE",
		"nodest": "EMPTY_DESTINATION", "badtopic": "INVALID_TOPIC"}
	for id, code := range want {
		var got, msg string
		if err := db.QueryRow(`SELECT last_error_code, last_error_message FROM outbox_event WHERE event_id=$1 AND status='DEAD'`, id).Scan(&got, &msg); err != nil || got != code || msg == "" {
			t.Errorf("%s: code %q msg %q err %v, want %s", id, got, msg, err, code)
		}
	}
	if c := broker.Count(tp); c != 2 {
		t.Fatalf("topic holds %d records, want 2 (ok, after-big)", c)
	}
}

// Broker-side MESSAGE_TOO_LARGE (kfake fault on Produce) goes DEAD, not RETRY.
func TestBrokerMessageTooLargeIsDead(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := topic(t)
	relaytest.Insert(t, db, relaytest.Ev{ID: "x", AggID: "a", Version: 1, Topic: tp})
	broker.Cluster.ControlKey(0, kfakeProduceError(tp, 10 /* MESSAGE_TOO_LARGE */))
	newWorker(t, dsn, db, "w", opts{}).start(t)
	waitStatus(t, db, "DEAD", 1, 10*time.Second)
	var code string
	_ = db.QueryRow(`SELECT last_error_code FROM outbox_event`).Scan(&code)
	if code != publish.CodeMessageTooLarge {
		t.Fatalf("code %q", code)
	}
}

// Unknown topic: retried as TOPIC_NOT_FOUND within the grace, DEAD after it; and a
// topic created within the grace is delivered.
func TestUnknownTopic(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	n := topicSeq.Add(1) // fresh names: -count=N reuses the broker
	later, never := fmt.Sprintf("created-later-%d", n), fmt.Sprintf("never-created-%d", n)
	relaytest.Insert(t, db,
		relaytest.Ev{ID: "late-topic", AggID: "a", Version: 1, Topic: later},
		relaytest.Ev{ID: "never", AggID: "b", Version: 1, Topic: never},
	)
	if _, err := db.Exec(`UPDATE outbox_event SET created_at = now() - interval '1 hour' WHERE event_id = 'never'`); err != nil {
		t.Fatal(err)
	}
	newWorker(t, dsn, db, "w", opts{grace: 10 * time.Minute, minBackoff: 100 * time.Millisecond, poll: 50 * time.Millisecond}).start(t)
	waitStatus(t, db, "DEAD", 1, 10*time.Second)
	relaytest.Eventually(t, 10*time.Second, "late-topic retried as TOPIC_NOT_FOUND", func() bool {
		var code sql.NullString
		_ = db.QueryRow(`SELECT last_error_code FROM outbox_event WHERE event_id='late-topic' AND status='RETRY'`).Scan(&code)
		return code.String == publish.CodeTopicNotFound
	})
	// Waiting for a topic does not use up attempts: once the topic exists, a broker
	// outage still has the whole --max-attempts budget.
	var attempts int
	if err := db.QueryRow(`SELECT retry_count FROM outbox_event WHERE event_id='late-topic'`).Scan(&attempts); err != nil || attempts != 0 {
		t.Fatalf("late-topic retry_count = %d (%v), want 0 while waiting for the topic", attempts, err)
	}
	var code string
	_ = db.QueryRow(`SELECT last_error_code FROM outbox_event WHERE event_id='never'`).Scan(&code)
	if code != publish.CodeTopicNotFound {
		t.Fatalf("never: %q", code)
	}
	if broker.Count(never) != 0 || len(broker.Cluster.PartitionInfos(never)) != 0 {
		t.Fatal("the relay auto-created a topic")
	}
	if err := broker.CreateTopic(later, 1); err != nil {
		t.Fatal(err)
	}
	defer func() {
		var st, code, msg string
		var n int
		_ = db.QueryRow(`SELECT status, coalesce(last_error_code,''), coalesce(last_error_message,''), retry_count FROM outbox_event WHERE event_id='late-topic'`).Scan(&st, &code, &msg, &n)
		t.Logf("late-topic: %s %s %q %d", st, code, msg, n)
	}()
	waitStatus(t, db, "SENT", 1, 20*time.Second)
}

func randomString(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return string(b)
}

var _ = sync.Mutex{}
