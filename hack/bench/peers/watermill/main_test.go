package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

var wmBinary string // wmforward, built once by TestMain

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wmforward-bin-")
	if err != nil {
		panic(err)
	}
	wmBinary = filepath.Join(dir, "wmforward")
	if out, err := exec.Command("go", "build", "-o", wmBinary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// event is one outbox row as the harness writes it (README.md).
type event struct {
	id, topic, key string
	payload        []byte
	inserted       time.Time
}

// envelope is the forwarder's JSON envelope (watermill components/forwarder).
func (e event) envelope() []byte {
	b, _ := json.Marshal(map[string]any{
		"destination_topic": e.topic,
		"uuid":              e.id,
		"payload":           e.payload, // []byte -> standard base64
		"metadata":          map[string]string{"event_id": e.id, "key": e.key},
	})
	return b
}

// The statements documented in README.md.
const (
	insertSQL = `INSERT INTO "watermill_outbox" (uuid, payload, metadata, transaction_id) VALUES ($1, $2, '{}', pg_current_xact_id())`
	// The same row with the envelope built by PostgreSQL from plain values.
	insertBuildSQL = `INSERT INTO "watermill_outbox" (uuid, payload, metadata, transaction_id)
VALUES ($1::text, json_build_object(
    'destination_topic', $2::text,
    'uuid', $1::text,
    'payload', encode(convert_to($3::text, 'UTF8'), 'base64'),
    'metadata', json_build_object('event_id', $1::text, 'key', $4::text)),
  '{}', pg_current_xact_id())`
	copySQL = `COPY "watermill_outbox" (uuid, payload, metadata, transaction_id) FROM STDIN`
)

func TestForwardEndToEnd(t *testing.T) {
	pgDSN := startPostgres(t)
	kc, err := kfake.NewCluster(kfake.SeedTopics(6, "orders", "payments"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	brokers := strings.Join(kc.ListenAddrs(), ",")

	// init creates the tables and prints the quoted table name.
	out, err := exec.Command(wmBinary, "init", "--dsn", pgDSN, "--outbox-topic", "outbox").Output()
	if err != nil {
		t.Fatalf("init: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != `"watermill_outbox"` {
		t.Fatalf("init printed %q", got)
	}
	if code := exitCode(exec.Command(wmBinary, "forward", "--dsn", pgDSN)); code != 2 {
		t.Fatalf("missing flags: exit %d, want 2", code)
	}
	for _, bad := range [][]string{{"--subscribe-batch-size", "-1"}, {"--poll-interval", "-1s"}, {"--poll-interval", "soon"}} {
		args := append([]string{"forward", "--dsn", pgDSN, "--brokers", brokers, "--outbox-topic", "outbox"}, bad...)
		if code := exitCode(exec.Command(wmBinary, args...)); code != 2 {
			t.Fatalf("%v: exit %d, want 2", bad, code)
		}
	}

	db, err := sql.Open("postgres", pgDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	// 1,000 events over 2 topics x 10 keys. e1 is the README example.
	const n = 1000
	events := make([]event, n)
	for i := range events {
		e := &events[i]
		e.id = "e" + strconv.Itoa(i+1)
		if i%2 == 0 {
			e.topic, e.key = "orders", "agg-"+strconv.Itoa(i/2%10)
		} else {
			e.topic, e.key = "payments", "pay-"+strconv.Itoa(i/2%10)
		}
		// Long enough that PostgreSQL's encode(..., 'base64') wraps lines.
		e.payload = fmt.Appendf(nil, `{"id":%q,"key":%q,"pad":"%s"}`, e.id, e.key, strings.Repeat("x", i%80))
	}
	events[0].key, events[0].payload = "agg-1", []byte(`{"a":1}`)

	consumer := newConsumer(t, kc.ListenAddrs())
	seen := map[string]*kgo.Record{}
	var order = map[string][]string{} // key -> event ids in consumed order
	var received = map[string]time.Time{}
	consume := func(want int) time.Time {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for len(seen) < want {
			fs := consumer.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("timed out with %d/%d records", len(seen), want)
			}
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				id := header(r, "event_id")
				if seen[id] != nil {
					t.Errorf("duplicate %s", id)
				}
				seen[id] = r
				received[id] = now
				order[string(r.Key)] = append(order[string(r.Key)], id)
			})
		}
		return time.Now()
	}

	// Phase 1, forwarder stopped: e1 by single INSERT, e2..e500 by one COPY; then
	// time how long one forwarder takes to drain the backlog.
	if _, err := db.Exec(insertSQL, events[0].id, events[0].envelope()); err != nil {
		t.Fatal(err)
	}
	copyRows(t, db, events[1:n/2])
	start := time.Now()
	fwdA := startForwarder(t, pgDSN, brokers)
	end := consume(n / 2)
	t.Logf("drain: %d backlog events forwarded by one process in %v (%.0f events/s, incl. start-up)",
		n/2, end.Sub(start).Round(time.Millisecond), float64(n/2)/end.Sub(start).Seconds())

	// Phase 2: a second forwarder on the same consumer group, and e501..e1000 by
	// single-row INSERTs (autocommit), half with the envelope built in SQL.
	fwdB := startForwarder(t, pgDSN, brokers)
	start = time.Now()
	produced := make(chan error, 1)
	go func() { // produce while the main goroutine consumes
		for i := n / 2; i < n; i++ {
			e := &events[i]
			e.inserted = time.Now()
			var err error
			if i%2 == 0 {
				_, err = db.Exec(insertSQL, e.id, e.envelope())
			} else {
				_, err = db.Exec(insertBuildSQL, e.id, e.topic, string(e.payload), e.key)
			}
			if err != nil {
				produced <- err
				return
			}
			time.Sleep(time.Millisecond) // a steady trickle rather than one burst
		}
		produced <- nil
	}()
	end = consume(n)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	var lat []time.Duration
	for _, e := range events[n/2:] {
		lat = append(lat, received[e.id].Sub(e.inserted))
	}
	slices.Sort(lat)
	t.Logf("trickle: %d single-row INSERTs forwarded in %v; insert->consume latency p50 %v p99 %v max %v",
		n/2, end.Sub(start).Round(time.Millisecond), lat[len(lat)/2].Round(time.Millisecond),
		lat[len(lat)*99/100].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))

	// Every event arrived once with its topic, key, partition, value and headers.
	part := kgo.StickyKeyPartitioner(nil).ForTopic("")
	for _, e := range events {
		r := seen[e.id]
		if r == nil {
			t.Errorf("%s missing", e.id)
			continue
		}
		if r.Topic != e.topic || string(r.Key) != e.key || !bytes.Equal(r.Value, e.payload) {
			t.Errorf("%s: got topic %q key %q value %s, want %q %q %s", e.id, r.Topic, r.Key, r.Value, e.topic, e.key, e.payload)
		}
		if want := part.Partition(&kgo.Record{Key: []byte(e.key)}, 6); int(r.Partition) != want {
			t.Errorf("%s: partition %d, want murmur2 partition %d", e.id, r.Partition, want)
		}
		hdrs := map[string]string{}
		for _, h := range r.Headers {
			hdrs[h.Key] = string(h.Value)
		}
		want := map[string]string{"_watermill_message_uuid": e.id, "event_id": e.id, "key": e.key}
		if fmt.Sprint(hdrs) != fmt.Sprint(want) {
			t.Errorf("%s: headers %v, want %v", e.id, hdrs, want)
		}
	}
	// Per-key order: consumed order equals insertion order.
	for key, ids := range order {
		var want []string
		for _, e := range events {
			if e.key == key {
				want = append(want, e.id)
			}
		}
		if !slices.Equal(ids, want) {
			t.Errorf("key %s: order %v, want %v", key, ids, want)
		}
	}

	a, b := fwdA.forwarded(t), fwdB.forwarded(t)
	t.Logf("forwarded per process on one consumer group: A=%d B=%d", a, b)
	if a+b != n {
		t.Errorf("forwarded total %d+%d, want %d", a, b, n)
	}
	fwdA.stop(t)
	fwdB.stop(t)
}

func copyRows(t *testing.T, db *sql.DB, events []event) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	// COPY cannot call pg_current_xact_id() per row: read it once in the same
	// transaction and pass it as the transaction_id value.
	var xid string
	if err := tx.QueryRow(`SELECT pg_current_xact_id()::text`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	stmt, err := tx.Prepare(copySQL)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if _, err := stmt.Exec(e.id, string(e.envelope()), "{}", xid); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stmt.Exec(); err != nil {
		t.Fatal(err)
	}
	if err := stmt.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func newConsumer(t *testing.T, brokers []string) *kgo.Client {
	t.Helper()
	c, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("orders", "payments"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// fwdProc is a running `wmforward forward` process.
type fwdProc struct {
	cmd     *exec.Cmd
	metrics string
	exited  chan struct{} // closed after Wait; err is its result
	err     error
}

func startForwarder(t *testing.T, dsn, brokers string) *fwdProc {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(wmBinary, "forward", "--dsn", dsn, "--brokers", brokers,
		"--outbox-topic", "outbox", "--metrics-addr", addr)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &fwdProc{cmd: cmd, metrics: "http://" + addr + "/metrics", exited: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // relay the process's log into the test log
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Log("wmforward:", sc.Text())
		}
	}()
	go func() { wg.Wait(); f.err = cmd.Wait(); close(f.exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-f.exited })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(f.scrape(), "wmforward_running 1") {
		if time.Now().After(deadline) {
			t.Fatal("forwarder not running after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return f
}

func (f *fwdProc) scrape() string {
	resp, err := http.Get(f.metrics)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func (f *fwdProc) forwarded(t *testing.T) int {
	for _, line := range strings.Split(f.scrape(), "\n") {
		if v, ok := strings.CutPrefix(line, "wmforward_forwarded_total "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	t.Errorf("no wmforward_forwarded_total from %s", f.metrics)
	return 0
}

// stop sends SIGTERM and expects exit status 0.
func (f *fwdProc) stop(t *testing.T) {
	t.Helper()
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-f.exited:
		if f.err != nil {
			t.Errorf("forwarder exit after SIGTERM: %v", f.err)
		}
	case <-time.After(40 * time.Second):
		t.Error("forwarder still running 40s after SIGTERM")
	}
}

func exitCode(cmd *exec.Cmd) int {
	_ = cmd.Run()
	return cmd.ProcessState.ExitCode()
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startPostgres runs a private PostgreSQL (initdb into a temp dir, postgres on a free
// loopback port, as the "postgres" user when the test runs as root) and returns a DSN.
// A minimal copy of the repo's internal/testenv/pgtest, which a nested module cannot import.
func startPostgres(t *testing.T) string {
	t.Helper()
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		t.Skip("PostgreSQL server binaries (initdb, postgres) not on PATH")
	}
	bin := filepath.Dir(initdb)
	dir, err := os.MkdirTemp("", "wmforward-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var cred *syscall.Credential
	if os.Geteuid() == 0 { // initdb and postgres refuse to run as root
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs a postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := strings.TrimPrefix(freeAddr(t), "127.0.0.1:")
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		t.Fatal(err)
	}
	pg := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", port,
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "fsync=off")
	pg.Stdout, pg.Stderr = logf, logf
	pg.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // fast shutdown, then wait
		_ = pg.Process.Signal(syscall.SIGINT)
		_ = pg.Wait()
		logf.Close()
	})
	dsn := "postgres://postgres@127.0.0.1:" + port + "/postgres?sslmode=disable"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		db, _ := sql.Open("postgres", dsn)
		err := db.Ping()
		db.Close()
		if err == nil {
			return dsn
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("postgres not ready: %v\n%s", err, b)
		}
	}
}
