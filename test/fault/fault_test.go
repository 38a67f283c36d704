// Package fault is the relay's fault-injection suite: the real relayworker binary as
// child processes, a private PostgreSQL and an in-process Kafka-protocol broker
// (kfake). Each test breaks one part mid-stream - the database server, a worker's
// lease (SIGSTOP), the broker - or points the relay at a hot standby, and proves the
// guarantees of docs/architecture.md ("State machine"): every committed event reaches
// Kafka at least once, per-aggregate order holds (first occurrences in version order;
// duplicates only repeat older versions), duplicates are counted and small, nothing is
// left SENDING, and the workers neither exit nor retry in a hot loop. The TestV2 tests
// do the same on a table of contract v2 (docs/contract-v2.md, "As built: fault tests"),
// checked against the table's rows with verifyV2.
package fault

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/testenv/kafkatest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relayproc"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
	"github.com/outbox-operator/outbox-operator/outbox"
)

var (
	bin    string
	broker *kafkatest.Broker
	// runs numbers topics: -count=N reuses the broker, so every run gets fresh ones.
	runs atomic.Int64
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "fault-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if bin, err = relayproc.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if broker, err = kafkatest.StartUnpluggable(3); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer broker.Close()
	// wal_level=logical for the logical-replication tests (cdc_test.go) and prepared
	// transactions for the v2 producer shapes (v2txshapes_test.go); the others do not
	// notice.
	settings := append(append([]string{}, pgtest.LogicalReplication...), pgtest.PreparedTransactions...)
	if relaytest.PG, err = pgtest.Start(pgtest.Options{Settings: settings}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer relaytest.PG.Stop()
	return m.Run()
}

// newTopic creates a fresh 3-partition topic.
func newTopic(t *testing.T, prefix string) string {
	t.Helper()
	tp := fmt.Sprintf("%s-%d", prefix, runs.Add(1))
	if err := broker.CreateTopic(tp, 3); err != nil {
		t.Fatal(err)
	}
	return tp
}

// worker is one relayworker process with its metrics and health endpoints.
type worker struct {
	*relayproc.Proc
	name                 string
	metricsURL, readyURL string
}

// startWorker runs `relayworker relay` against dsn and the suite's broker with quick
// polls and short, bounded backoff (100ms..1s); extra flags are appended.
func startWorker(t *testing.T, name, dsn string, extra ...string) *worker {
	t.Helper()
	metricsAddr, healthAddr := relayproc.FreeAddr(t), relayproc.FreeAddr(t)
	args := append([]string{"relay", "--metrics-addr=" + metricsAddr, "--health-addr=" + healthAddr,
		"--poll-interval=100ms", "--min-backoff=100ms", "--max-backoff=1s", "--max-attempts=1000"}, extra...)
	p := relayproc.Spawn(t, bin, []string{"OUTBOX_DSN=" + dsn, "KAFKA_BROKERS=" + broker.AddrList(), "RELAY_WORKER_ID=" + name}, args...)
	w := &worker{Proc: p, name: name, metricsURL: "http://" + metricsAddr + "/metrics", readyURL: "http://" + healthAddr + "/readyz"}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, p.Stderr())
		}
	})
	return w
}

func (w *worker) waitReady(t *testing.T) {
	t.Helper()
	relaytest.Eventually(t, 20*time.Second, w.name+" /readyz 200", func() bool {
		if w.Exited() {
			t.Fatalf("%s exited: %s", w.name, w.Stderr())
		}
		c, _ := relayproc.HTTPGet(w.readyURL)
		return c == 200
	})
}

// metric is the worker's current value of a counter summed over all label sets
// (-1 while the endpoint does not answer).
func (w *worker) metric(name string) float64 {
	v, ok := relayproc.Metric(w.metricsURL, name, nil)
	if !ok {
		return -1
	}
	return v
}

var failedLine = regexp.MustCompile(`"msg":"[^"]*failed`)

// failureLines counts the worker's log lines about failures (relay cycle, marks,
// publishes, LISTEN): each repeats only after a backoff, so a hot loop shows up here.
func (w *worker) failureLines() int { return len(failedLine.FindAllString(w.Stderr(), -1)) }

// checkSurvived fails t when a worker exited or logged failures more than max times.
func checkSurvived(t *testing.T, max int, ws ...*worker) {
	t.Helper()
	for _, w := range ws {
		if w.Exited() {
			t.Fatalf("%s exited during the fault (code %d)", w.name, w.Cmd.ProcessState.ExitCode())
		}
		n := w.failureLines()
		t.Logf("%s: %d failure log lines", w.name, n)
		if n > max {
			t.Errorf("%s logged %d failure lines, more than %d: a hot loop?", w.name, n, max)
		}
	}
}

// producer commits a steady stream of events through the outbox package: each
// transaction carries the next two versions of one aggregate and the next version of
// another, so batches hold several versions of an aggregate.
type producer struct {
	db        *sql.DB
	pub       *outbox.Publisher
	topic     string
	aggs      int
	stop      chan struct{}
	done      chan struct{}
	err       error
	committed atomic.Int64 // events known to be committed
	retried   atomic.Int64 // failed transaction attempts that were retried
}

func startProducer(t *testing.T, db *sql.DB, topic string, aggs int) *producer {
	p := &producer{db: db, pub: outbox.Default(), topic: topic, aggs: aggs, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	t.Cleanup(func() { p.halt() })
	return p
}

func (p *producer) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// Stop stops the stream after the current transaction and fails t if the producer
// gave up.
func (p *producer) Stop(t *testing.T) {
	t.Helper()
	p.halt()
	if p.err != nil {
		t.Fatal(p.err)
	}
}

func (p *producer) event(agg int, v int64) outbox.Event {
	return outbox.Event{
		EventID:       fmt.Sprintf("%s-a%d-v%d", p.topic, agg, v),
		AggregateType: "order", AggregateID: fmt.Sprintf("%s-a%d", p.topic, agg), AggregateVersion: v,
		EventType: "order.changed", Destination: p.topic, Payload: []byte(fmt.Sprintf(`{"v":%d}`, v)),
	}
}

func (p *producer) run() {
	defer close(p.done)
	last := make([]int64, p.aggs) // last committed version per aggregate
	for i := 0; ; i++ {
		select {
		case <-p.stop:
			return
		default:
		}
		a, b := i%p.aggs, (i*7+3)%p.aggs
		evs := []outbox.Event{p.event(a, last[a]+1), p.event(a, last[a]+2)}
		if b != a {
			evs = append(evs, p.event(b, last[b]+1))
		}
		if err := p.commit(evs); err != nil {
			p.err = err
			return
		}
		last[a] += 2
		if b != a {
			last[b]++
		}
		p.committed.Add(int64(len(evs)))
		time.Sleep(4 * time.Millisecond) // a steady stream, not a flood
	}
}

// commit commits evs in one transaction and retries until it is known to be
// committed. Retries reuse the event ids (outbox's stable-id rule): a unique violation
// on a retry means an earlier attempt's COMMIT went through although its answer was
// lost with the connection.
func (p *producer) commit(evs []outbox.Event) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := p.try(evs)
		var pqErr *pq.Error
		if err == nil || errors.As(err, &pqErr) && pqErr.Code == "23505" {
			return nil
		}
		p.retried.Add(1)
		if time.Now().After(deadline) {
			return fmt.Errorf("producer: no commit for 60s: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *producer) try(evs []outbox.Event) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit: ErrTxDone
	if err := p.pub.Publish(ctx, tx, evs...); err != nil {
		return err
	}
	return tx.Commit()
}

// count runs a count(*) query; -1 when the database does not answer. Only for a
// database a test has deliberately crashed (pgcrash_test.go, TestCDCPostgresCrash):
// after the restart, db's pool still holds connections the crash broke, and a query
// on one of them fails once; -1 makes an Eventually ask again. Everywhere the
// database is meant to be up, use mustCount, so a failing query is a failure and not
// a count that merely differs from the one awaited.
func count(db *sql.DB, query string, args ...any) int {
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		return -1
	}
	return n
}

// mustCount runs a count(*) query and fails t when it does not answer (count is for
// a database a test crashed on purpose).
func mustCount(t *testing.T, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// dbNow is the database clock.
func dbNow(t *testing.T, db *sql.DB) time.Time {
	t.Helper()
	var now time.Time
	if err := db.QueryRow(`SELECT now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// delivery is what reached the topic.
type delivery struct {
	events, records, duplicates int
}

// verifyDelivery checks topic against the outbox table: every row is SENT; every
// committed event is in Kafka at least once and nothing else is (no event of a
// rolled-back transaction); per aggregate the first occurrences come in version order
// and a duplicate only repeats a version already seen.
func verifyDelivery(t *testing.T, db *sql.DB, topic string) delivery {
	t.Helper()
	rows, err := db.Query(`SELECT event_id, status FROM public.outbox_event WHERE destination = $1`, topic)
	if err != nil {
		t.Fatal(err)
	}
	committed := map[string]bool{}
	notSent := map[string]int{}
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			t.Fatal(err)
		}
		committed[id] = true
		if status != "SENT" {
			notSent[status]++
		}
	}
	// Next stops on a failed read as on the end: only Err tells them apart.
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if len(notSent) > 0 {
		t.Fatalf("rows not SENT: %v", notSent)
	}
	return verifyRecords(t, committed, topic)
}

// verifyRecords checks topic against the committed event ids: each is in Kafka at
// least once and nothing else is; per aggregate the first occurrences come in version
// order and a duplicate only repeats a version already seen.
func verifyRecords(t *testing.T, committed map[string]bool, topic string) delivery {
	t.Helper()
	want := broker.Count(topic)
	recs, err := broker.ReadAllWithin(30*time.Second, topic, int(want))
	if err != nil {
		t.Fatalf("read %s: %v (got %d of %d records)", topic, err, len(recs), want)
	}
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return recs[i].Offset < recs[j].Offset
	})
	seen := map[string]int{}
	newest := map[string]int64{} // aggregate -> newest version seen
	for _, r := range recs {
		h := map[string]string{}
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		id, agg := h["event_id"], h["aggregate_id"]
		v, err := strconv.ParseInt(h["aggregate_version"], 10, 64)
		if err != nil || id == "" || agg == "" {
			t.Fatalf("record p%d@%d lacks contract headers: %v", r.Partition, r.Offset, h)
		}
		if !committed[id] {
			t.Fatalf("record %s in Kafka is not a committed event", id)
		}
		if seen[id] == 0 && v <= newest[agg] {
			t.Fatalf("aggregate %s: first occurrence of version %d after version %d (order broken)", agg, v, newest[agg])
		}
		if seen[id] > 0 && v > newest[agg] {
			t.Fatalf("aggregate %s: duplicate of version %d newer than the newest seen %d", agg, v, newest[agg])
		}
		newest[agg] = max(newest[agg], v)
		seen[id]++
	}
	for id := range committed {
		if seen[id] == 0 {
			t.Fatalf("committed event %s never reached Kafka (loss)", id)
		}
	}
	return delivery{events: len(committed), records: len(recs), duplicates: len(recs) - len(seen)}
}
