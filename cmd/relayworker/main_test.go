package main_test

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-operator/outbox-operator/internal/testenv/kafkatest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relayproc"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

var (
	bin    string
	broker *kafkatest.Broker
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "relayworker-bin-")
	if err != nil {
		panic(err)
	}
	if bin, err = relayproc.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	broker, err = kafkatest.Start(3)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	defer broker.Close()
	relaytest.Main(m)
}

// run executes relayworker with args and env and returns exit code and stderr.
func run(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	return relayproc.Run(t, bin, append([]string{"PATH=" + os.Getenv("PATH")}, env...), args...)
}

func oneLine(t *testing.T, stderr string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "relayworker: ") {
		t.Fatalf("last stderr line %q is not the one-line error", last)
	}
	if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") {
		t.Fatalf("panic output: %s", stderr)
	}
	return last
}

func freeAddr(t *testing.T) string { return relayproc.FreeAddr(t) }

func TestBadInput(t *testing.T) {
	dsn := relaytest.PG.NewDatabase(t) // exists, but no outbox table
	secretDSN := "postgres://app:s3cret@127.0.0.1:1/db?sslmode=disable&connect_timeout=2"
	cases := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"no command", nil, nil, 2, "missing command"},
		{"unknown command", nil, []string{"frobnicate"}, 2, "unknown command"},
		{"no dsn", nil, []string{"migrate"}, 2, "--dsn (OUTBOX_DSN) is required"},
		{"bad table", []string{"OUTBOX_DSN=" + dsn}, []string{"migrate", "--table", "Robert'); DROP"}, 2, "not a valid identifier"},
		{"unreachable dsn", []string{"OUTBOX_DSN=" + secretDSN, "KAFKA_BROKERS=127.0.0.1:9092"}, []string{"relay", "--metrics-addr=", "--health-addr="}, 1, "database unreachable"},
		{"missing table", []string{"OUTBOX_DSN=" + dsn, "KAFKA_BROKERS=" + broker.AddrList()}, []string{"relay", "--metrics-addr=", "--health-addr="}, 1, "does not exist (run `relayworker migrate`)"},
		{"broker list does not parse", []string{"OUTBOX_DSN=" + dsn, "KAFKA_BROKERS=kafka:notaport"}, []string{"relay"}, 2, "KAFKA_BROKERS"},
		{"broker list empty entry", []string{"OUTBOX_DSN=" + dsn}, []string{"relay", "--brokers", "a:1,,b:2"}, 2, "empty entry"},
		{"no brokers", []string{"OUTBOX_DSN=" + dsn}, []string{"relay"}, 2, "--brokers (KAFKA_BROKERS) is required"},
		{"bad duration env", []string{"OUTBOX_DSN=" + dsn, "KAFKA_BROKERS=a:1", "RELAY_LEASE=soon"}, []string{"relay"}, 2, "RELAY_LEASE"},
		{"lease below poll", []string{"OUTBOX_DSN=" + dsn, "KAFKA_BROKERS=a:1"}, []string{"relay", "--lease=2s", "--poll-interval=5s"}, 2, "must exceed --poll-interval"},
		{"batch size", []string{"OUTBOX_DSN=" + dsn, "KAFKA_BROKERS=a:1"}, []string{"relay", "--batch-size=0"}, 2, "--batch-size"},
		{"unknown flag", nil, []string{"relay", "--nope"}, 2, "flag provided but not defined"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stderr := run(t, c.env, c.args...)
			line := oneLine(t, stderr)
			if code != c.code || !strings.Contains(line, c.want) {
				t.Fatalf("exit %d line %q; want exit %d containing %q", code, line, c.code, c.want)
			}
			if strings.Contains(stderr, "s3cret") {
				t.Fatal("password leaked to stderr")
			}
		})
	}
}

func TestMigrateIdempotentThenRelay(t *testing.T) {
	dsn := relaytest.PG.NewDatabase(t)
	for i := 0; i < 2; i++ {
		if code, stderr := run(t, []string{"OUTBOX_DSN=" + dsn}, "migrate", "--contract", "v1", "--schema", "app", "--table", "events", "--notify-trigger"); code != 0 {
			t.Fatalf("migrate #%d: exit %d: %s", i, code, stderr)
		}
	}
	db, _ := sql.Open("postgres", dsn)
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_schema='app' AND table_name IN ('events','events_archive','events_replay_audit','message_consume')`).Scan(&n); err != nil || n != 4 {
		t.Fatalf("tables: %d %v", n, err)
	}
}

func startRelay(t *testing.T, dsn string, extra ...string) *child {
	t.Helper()
	args := append([]string{"relay", "--metrics-addr=", "--health-addr=" + freeAddr(t), "--poll-interval=100ms"}, extra...)
	return spawn(t, []string{"OUTBOX_DSN=" + dsn, "KAFKA_BROKERS=" + broker.AddrList(), "RELAY_WORKER_ID=" + t.Name()}, args...)
}

func migrated(t *testing.T) (string, *sql.DB) { return relaytest.NewDB(t) }

// kill -9 between publish and mark: the broker has the batch, the rows are still
// SENDING. Another worker takes over after the lease: every event arrives at least
// once, all rows end SENT, the duplicates are exactly the crashed batch.
func TestKill9BetweenPublishAndMark(t *testing.T) {
	dsn, db := migrated(t)
	tp := fmt.Sprintf("kill9-%d", endpointRuns.Add(1)) // fresh per run: -count=N reuses the broker
	if err := broker.CreateTopic(tp, 3); err != nil {
		t.Fatal(err)
	}
	const n = 200
	relaytest.Insert(t, db, relaytest.Many("k", tp, n)...)

	// When the crashing worker's produce arrives, lock the table against UPDATEs before
	// the broker stores and acknowledges it: the worker then hangs in its mark.
	lockTx := make(chan *sql.Tx, 1)
	broker.Cluster.ControlKey(0, func(req kmsg.Request) (kmsg.Response, error, bool) {
		pr := req.(*kmsg.ProduceRequest)
		if len(pr.Topics) == 0 || pr.Topics[0].Topic != tp {
			broker.Cluster.KeepControl()
			return nil, nil, false
		}
		tx, err := db.Begin()
		if err == nil {
			_, err = tx.Exec(`LOCK TABLE outbox_event IN EXCLUSIVE MODE`)
		}
		if err != nil {
			t.Error(err)
		}
		lockTx <- tx
		broker.Cluster.DropControl()
		return nil, nil, false
	})
	p := startRelay(t, dsn, "--lease=3s", "--batch-size=500")
	tx := <-lockTx
	relaytest.Eventually(t, 10*time.Second, "broker stored the batch", func() bool { return broker.Count(tp) == n })
	relaytest.Eventually(t, 10*time.Second, "worker blocked in its mark", func() bool {
		var waiting int
		_ = db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE%'`).Scan(&waiting)
		return waiting >= 1
	})
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	// The dead worker's UPDATE is still queued on the server; a crashed client's backend
	// would die with it (connection reset), so end it before releasing the lock.
	if _, err := db.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE%'`); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback()
	if c := relaytest.CountStatus(t, db); c["SENDING"] != n {
		t.Fatalf("after crash: %v (want all %d SENDING)", c, n)
	}
	startRelay(t, dsn, "--lease=3s")
	relaytest.Eventually(t, 30*time.Second, "all SENT after take-over", func() bool { return relaytest.CountStatus(t, db)["SENT"] == n })
	recs, err := broker.ReadAllWithin(20*time.Second, tp, 2*n)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range recs {
		for _, h := range r.Headers {
			if h.Key == "event_id" {
				seen[string(h.Value)]++
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("%d distinct events in Kafka, want %d (loss!)", len(seen), n)
	}
	if len(recs) != 2*n {
		t.Fatalf("%d records, want %d (each event exactly duplicated once)", len(recs), 2*n)
	}
}

// SIGTERM: stop claiming, release what is in flight, exit 0 within the grace.
func TestSIGTERMReleasesLeases(t *testing.T) {
	dsn, db := migrated(t)
	tp := fmt.Sprintf("sigterm-%d", endpointRuns.Add(1))
	if err := broker.CreateTopic(tp, 3); err != nil {
		t.Fatal(err)
	}
	relaytest.Insert(t, db, relaytest.Many("s", tp, 50)...)
	// Hold the produce request so the batch is in flight when SIGTERM arrives.
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	broker.Cluster.ControlKey(0, func(req kmsg.Request) (kmsg.Response, error, bool) {
		pr := req.(*kmsg.ProduceRequest)
		if len(pr.Topics) == 0 || pr.Topics[0].Topic != tp {
			broker.Cluster.KeepControl()
			return nil, nil, false
		}
		once.Do(func() { close(entered) })
		broker.Cluster.SleepControl(func() { <-release })
		broker.Cluster.KeepControl()
		return nil, nil, false
	})
	defer close(release)
	p := startRelay(t, dsn, "--lease=60s", "--shutdown-timeout=1s")
	<-entered
	start := time.Now()
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.Done():
	case <-time.After(15 * time.Second):
		t.Fatalf("no exit 15s after SIGTERM; stderr: %s", p.Stderr())
	}
	if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d: %s", code, p.Stderr())
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("shutdown took %s", took)
	}
	c := relaytest.CountStatus(t, db)
	if c["SENDING"] != 0 || c["PENDING"] != 50 {
		t.Fatalf("after SIGTERM: %v; want the 50 in-flight rows released to PENDING", c)
	}
}
