// stack.go: the parts every run shares: the private PostgreSQL (fsync on, with
// pg_stat_statements), the Kafka-protocol broker as its own process, the binaries
// under test, and child processes with their stderr kept for when a run fails.

package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
)

// relayRole is the database user the relay processes log in as, so pg_stat_statements
// can tell their statements from the harness's own.
const relayRole = "relay"

type stack struct {
	pg                                  *pgtest.Server
	admin                               *sql.DB // superuser on the "postgres" database: pg_stat_statements
	broker                              *proc
	brokers                             string
	dir                                 string
	relayBin, peerBin, brokerBin, v1Bin string
	prof                                *profiler // nil unless -profile
	postmaster                          int       // pid: sampleCPU counts its processes as postgres
}

func startStack(fsync, withPeer, logical bool) (*stack, error) {
	s := &stack{}
	var err error
	if s.dir, err = os.MkdirTemp("", "outbox-bench-"); err != nil {
		return nil, err
	}
	if err := s.build(withPeer); err != nil {
		return s, err
	}
	settings := []string{"shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all"}
	if logical {
		// For the cdc peer. Every peer runs on the same server, so all pay for the
		// logical WAL level alike; without the cdc peer the server keeps the default.
		settings = append(settings, pgtest.LogicalReplication...)
	}
	settings = append(settings, strings.Fields(*pgSet)...)
	s.pg, err = pgtest.Start(pgtest.Options{Fsync: fsync, Settings: settings})
	if err != nil {
		return s, err
	}
	if s.admin, err = sql.Open("postgres", s.pg.DSN("postgres")); err != nil {
		return s, err
	}
	if s.postmaster, err = postmasterPID(s.admin); err != nil {
		return s, err
	}
	for _, q := range []string{
		`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`,
		`CREATE ROLE ` + relayRole + ` LOGIN SUPERUSER`,
	} {
		if _, err := s.admin.Exec(q); err != nil {
			return s, fmt.Errorf("%s: %w", q, err)
		}
	}
	addr, err := freeAddr()
	if err != nil {
		return s, err
	}
	s.brokers = addr
	s.broker, err = spawn("broker", s.brokerBin, nil, "--listen", addr, "--partitions", "6")
	if err != nil {
		return s, err
	}
	return s, waitKafka(addr)
}

// build compiles the relay, the broker and the straightforward v1 peer from this
// module and the Watermill peer from its own.
func (s *stack) build(withPeer bool) error {
	s.relayBin = filepath.Join(s.dir, "relayworker")
	s.brokerBin = filepath.Join(s.dir, "devbroker")
	s.v1Bin = filepath.Join(s.dir, "v1relay")
	steps := [][]string{
		{"", "go", "build", "-o", s.relayBin, "./cmd/relayworker"},
		{"", "go", "build", "-o", s.brokerBin, "./hack/devbroker"},
		{"", "go", "build", "-o", s.v1Bin, "./hack/bench/peers/v1relay"},
	}
	if withPeer {
		s.peerBin = filepath.Join(s.dir, "wmforward")
		steps = append(steps, []string{"hack/bench/peers/watermill", "go", "build", "-o", s.peerBin, "."})
	}
	for _, st := range steps {
		cmd := exec.Command(st[1], st[2:]...)
		cmd.Dir = st[0]
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(st[1:], " "), err, out)
		}
	}
	return nil
}

func (s *stack) close() {
	if s.broker != nil {
		s.broker.stop()
	}
	if s.admin != nil {
		s.admin.Close()
	}
	if s.pg != nil {
		_ = s.pg.Stop()
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// newDatabase creates a fresh database for one run; relayDSN logs in as relayRole.
func (s *stack) newDatabase(name string) (superDSN, relayDSN string, db *sql.DB, err error) {
	superDSN, err = s.pg.CreateDatabase(context.Background(), name)
	if err != nil {
		return "", "", nil, err
	}
	relayDSN = strings.Replace(superDSN, "postgres://postgres@", "postgres://"+relayRole+"@", 1)
	db, err = sql.Open("postgres", superDSN)
	if err != nil {
		return "", "", nil, err
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	return superDSN, relayDSN, db, nil
}

// peerDatabase is a fresh database prepared by p (tables, triggers).
func (s *stack) peerDatabase(p peer, tag string) (superDSN, relayDSN string, db *sql.DB, err error) {
	superDSN, relayDSN, db, err = s.newDatabase(tag)
	if err != nil {
		return "", "", nil, err
	}
	if err := p.setup(superDSN); err != nil {
		db.Close()
		return "", "", nil, err
	}
	return superDSN, relayDSN, db, nil
}

// createTopics creates fresh topics (6 partitions) so each run's consumer reads from
// offset 0 exactly what that run sent.
func (s *stack) createTopics(topics ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	for _, t := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t, 6, 1
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 {
			return fmt.Errorf("create topic %s: error code %d", t.Topic, t.ErrorCode)
		}
	}
	return nil
}

func waitKafka(addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("broker on %s did not start", addr)
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// proc is a child process of the harness (a relay worker, a peer, the broker).
type proc struct {
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan struct{}
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stderr.Len() < 1<<20 {
		p.stderr.Write(b)
	}
	return len(b), nil
}

func (p *proc) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stderr.String()
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return s
}

// spawned numbers -dump's process logs.
var spawned atomic.Int64

func spawn(name, bin string, env []string, args ...string) (*proc, error) {
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if *dumpDir != "" { // -dump: the process's log too, numbered in start order (a drain's workers and a latency run's share a name)
		f, err := os.Create(filepath.Join(*dumpDir, fmt.Sprintf("%02d-%s.log", spawned.Add(1), strings.ReplaceAll(name, " ", "_"))))
		if err != nil {
			return nil, fmt.Errorf("-dump: %w", err)
		}
		p.cmd.Stderr = io.MultiWriter(p, f)
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// exited returns an error when the process is no longer running.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited early (%v): %s", p.name, p.cmd.ProcessState, p.tail())
	default:
		return nil
	}
}

// stop sends SIGTERM and waits (SIGKILL after 10 s).
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func stopAll(ps []*proc) {
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop() }()
	}
	wg.Wait()
}

// run runs bin to completion and returns its stdout.
func run(bin string, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), args[0], err, errb.String())
	}
	return out.String(), nil
}
