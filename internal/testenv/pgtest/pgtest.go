// Package pgtest runs a private PostgreSQL server for tests, benchmarks and the local
// demo: initdb into a temporary directory, a postmaster on a free loopback port, and
// helpers to restart it or SIGKILL it for fault tests. Nothing is shared with a system
// PostgreSQL; hack/install-postgres.sh installs the binaries when they are missing.
// PG_VERSION=13..18 picks the server of that major version instead of Debian's, from
// hack/install-pg-matrix.sh (versions.go).
package pgtest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/lib/pq" // database/sql driver "postgres"

	"github.com/outbox-operator/outbox-operator/internal/testenv/freeport"
)

// Options tune the private server.
type Options struct {
	// Fsync keeps PostgreSQL's fsync on. Off by default: tests kill processes, not the
	// machine, so the OS page cache keeps committed data and runs are much faster.
	Fsync bool
	// MaxConnections defaults to 200.
	MaxConnections int
	// Logf receives the server's log location and life-cycle lines; nil discards them.
	Logf func(format string, args ...any)
	// Settings are extra server settings as name=value (passed as -c name=value after
	// the defaults, so they win), e.g. shared_preload_libraries=pg_stat_statements.
	Settings []string
	// Listen are addresses to listen on besides 127.0.0.1, e.g. the local cluster's
	// node address that pods reach (test/cluster).
	Listen []string
	// HBA are pg_hba.conf lines appended after initdb's own (which trust loopback
	// only), e.g. "host all all 10.201.0.0/24 scram-sha-256" for pods.
	HBA []string
	// HBAFirst are pg_hba.conf lines put before initdb's own, where they win (the
	// first matching line decides), e.g. "host all app 127.0.0.1/32 scram-sha-256"
	// so that role logs in with a password on loopback while the others are trusted.
	HBAFirst []string
}

// LogicalReplication are the settings a server needs for logical replication
// (Options.Settings): the relay's CDC mode and its tests.
var LogicalReplication = []string{"wal_level=logical", "max_replication_slots=20", "max_wal_senders=20"}

// PreparedTransactions are the settings a server needs for PREPARE TRANSACTION
// (Options.Settings): the default max_prepared_transactions=0 refuses it, and the v2
// contract's tests prepare producer transactions to show their rows wait for COMMIT
// PREPARED.
var PreparedTransactions = []string{"max_prepared_transactions=10"}

// Server is one private PostgreSQL instance.
type Server struct {
	Port int

	opts    Options
	binDir  string
	dir     string
	dataDir string
	cred    *syscall.Credential

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

var dbSeq atomic.Int64

// Start initialises a cluster in a new temporary directory and starts it.
func Start(opts Options) (*Server, error) {
	if opts.MaxConnections == 0 {
		opts.MaxConnections = 200
	}
	binDir, err := findBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: temp dir: %w", err)
	}
	s := &Server{opts: opts, binDir: binDir, dir: dir, dataDir: filepath.Join(dir, "data")}
	if err := s.dropRootPrivileges(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := s.initdb(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := s.startOnFreePort(); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// DSN returns a lib/pq URL for database db as the superuser "postgres".
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// CreateDatabase creates a fresh, uniquely named database and returns its DSN.
func (s *Server) CreateDatabase(ctx context.Context, prefix string) (string, error) {
	name := fmt.Sprintf("%s_%d_%d", sanitize(prefix), os.Getpid(), dbSeq.Add(1))
	db, err := sql.Open("postgres", s.DSN("postgres"))
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	return s.DSN(name), nil
}

// VersionNum is the server's server_version_num, e.g. 160014 for 16.14.
func (s *Server) VersionNum(ctx context.Context) (int, error) {
	db, err := sql.Open("postgres", s.DSN("postgres"))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	return serverVersionNum(ctx, db)
}

// serverVersionNum asks a connection or pool for server_version_num.
func serverVersionNum(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) (int, error) {
	var v string
	if err := q.QueryRowContext(ctx, `SHOW server_version_num`).Scan(&v); err != nil {
		return 0, fmt.Errorf("pgtest: server_version_num: %w", err)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("pgtest: server_version_num %q: %w", v, err)
	}
	return n, nil
}

// TB is the part of testing.TB that the per-test helpers need.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Name() string
	Cleanup(func())
}

// Main is a whole TestMain: it starts a private server into *srv, runs the package's
// tests, stops the server and exits with the tests' status.
func Main(m interface{ Run() int }, srv **Server) { MainWith(m, srv, Options{}) }

// MainWith is Main with the server started with opts.
func MainWith(m interface{ Run() int }, srv **Server, opts Options) {
	s, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*srv = s
	code := m.Run()
	_ = s.Stop()
	os.Exit(code)
}

// OpenDatabase creates a database for t and returns its DSN and a handle that is
// closed when t ends.
func (s *Server) OpenDatabase(t TB) (string, *sql.DB) {
	t.Helper()
	dsn := s.NewDatabase(t)
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { db.Close() })
	return dsn, db
}

// NewDatabase creates a database named after the test and returns its DSN; it fails
// the test on error.
func (s *Server) NewDatabase(t TB) string {
	t.Helper()
	dsn, err := s.CreateDatabase(context.Background(), t.Name())
	if err != nil {
		t.Fatalf("%v", err)
	}
	return dsn
}

// Kill9 SIGKILLs the postmaster and every backend (a crash, not a shutdown) and waits
// until they are gone. Call Restart to bring the server back with crash recovery.
func (s *Server) Kill9() error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return errors.New("pgtest: server is not running")
	}
	// Backends call setsid(), so they are not in the postmaster's process group: stop
	// the postmaster (no new children), list its children, kill them all, and wait
	// until none is left attached to the shared memory a restart wants to create.
	pid := cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	kids := childrenOf(pid)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGKILL)
	}
	<-done
	if err := s.waitGroupGone(pid); err != nil {
		return err
	}
	return waitGone(kids)
}

// Freeze SIGSTOPs the postmaster and every backend: the server hangs, neither
// answering nor closing a connection (new ones are still accepted by the kernel), as a
// host with stalled storage does. Thaw resumes it.
func (s *Server) Freeze() error { return s.signalAll(syscall.SIGSTOP) }

// Thaw resumes a frozen server.
func (s *Server) Thaw() error { return s.signalAll(syscall.SIGCONT) }

// signalAll sends sig to the postmaster and its children (backends call setsid(), so
// the process group does not reach them).
func (s *Server) signalAll(sig syscall.Signal) error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return errors.New("pgtest: server is not running")
	}
	pid := cmd.Process.Pid
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("pgtest: signal %v to the postmaster: %w", sig, err)
	}
	for _, k := range childrenOf(pid) {
		_ = syscall.Kill(k, sig)
	}
	return nil
}

// childrenOf lists the processes whose parent is pid (from /proc).
func childrenOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may contain spaces and parentheses.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(st)))
			out = append(out, child)
		}
	}
	return out
}

// waitGone waits until every pid has exited (a zombie counts as exited: it holds no
// memory, and an orphan's zombie may never be reaped in a container).
func waitGone(pids []int) error {
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				break
			}
			if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("pgtest: postgres process %d still alive 30s after SIGKILL", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// Restart stops the server if it runs (fast shutdown) and starts it again on the same
// port and data directory.
func (s *Server) Restart() error {
	if err := s.shutdown(); err != nil {
		return err
	}
	return s.start()
}

// startOnFreePort starts the server on a free port, trying another port when the
// start fails (another process may take a port between the check and the bind).
func (s *Server) startOnFreePort() error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if s.Port, err = freeport.Port(); err != nil {
			return err
		}
		if err = s.start(); err == nil {
			return nil
		}
		_ = s.shutdown()
	}
	return err
}

// Stop shuts the server down and removes its directory.
func (s *Server) Stop() error {
	err := s.shutdown()
	if rmErr := os.RemoveAll(s.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}

// Running reports whether the postmaster process is alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

func (s *Server) shutdown() error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGINT) // "fast" shutdown: abort sessions, checkpoint
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	return s.waitGroupGone(cmd.Process.Pid)
}

func (s *Server) start() error {
	logFile, err := os.OpenFile(filepath.Join(s.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: log file: %w", err)
	}
	fsync := "off"
	if s.opts.Fsync {
		fsync = "on"
	}
	args := []string{
		"-D", s.dataDir,
		"-p", strconv.Itoa(s.Port),
		"-c", "listen_addresses=" + strings.Join(append([]string{"127.0.0.1"}, s.opts.Listen...), ","),
		"-c", "unix_socket_directories=",
		"-c", "fsync=" + fsync,
		"-c", "full_page_writes=" + fsync,
		"-c", "max_connections=" + strconv.Itoa(s.opts.MaxConnections),
		"-c", "shared_buffers=128MB",
		"-c", "log_min_messages=warning",
		// PostgreSQL 13 stores new passwords as md5 by default, which a scram-sha-256
		// HBA line (HBAFirst) refuses; 14+ default to scram. md5 lines accept scram.
		"-c", "password_encryption=scram-sha-256",
	}
	for _, kv := range s.opts.Settings {
		args = append(args, "-c", kv)
	}
	cmd := exec.Command(filepath.Join(s.binDir, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.cred}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	s.logf("pgtest: postgres pid %d on 127.0.0.1:%d, log %s", cmd.Process.Pid, s.Port, logFile.Name())
	return s.waitReady(done)
}

func (s *Server) waitReady(done <-chan struct{}) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("pgtest: postgres exited during start-up: %s", s.logTail())
		default:
		}
		db, err := sql.Open("postgres", s.DSN("postgres"))
		if err == nil {
			// Ask which data directory answers: a server of another test process that
			// got the same port must not pass for this one.
			var dataDir string
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err = db.QueryRowContext(ctx, `SHOW data_directory`).Scan(&dataDir)
			cancel()
			db.Close()
			if err == nil {
				if filepath.Clean(dataDir) != filepath.Clean(s.dataDir) {
					return fmt.Errorf("pgtest: port %d is served by another server (%s)", s.Port, dataDir)
				}
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("pgtest: postgres not ready after 60s: %s", s.logTail())
}

// logTail is the end of the server log, for start-up errors (Stop removes the file).
func (s *Server) logTail() string {
	name := filepath.Join(s.dir, "postgres.log")
	b, err := os.ReadFile(name)
	if err != nil {
		return "see " + name
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return name + ":\n" + strings.TrimSpace(string(b))
}

// waitGroupGone waits until no process of the postmaster's group is left, so a
// restart does not trip over shared memory still attached by a dying backend.
func (s *Server) waitGroupGone(pgid int) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("pgtest: postgres processes of group %d still alive after 30s", pgid)
}

func (s *Server) initdb() error {
	if err := os.MkdirAll(s.dataDir, 0o700); err != nil {
		return err
	}
	for _, p := range []string{s.dir, s.dataDir} {
		if err := s.chown(p); err != nil {
			return err
		}
	}
	cmd := exec.Command(filepath.Join(s.binDir, "initdb"), "-D", s.dataDir, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: initdb: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return s.writeHBA()
}

// writeHBA puts Options.HBAFirst before and Options.HBA after initdb's pg_hba.conf.
func (s *Server) writeHBA() error {
	if len(s.opts.HBA) == 0 && len(s.opts.HBAFirst) == 0 {
		return nil
	}
	name := filepath.Join(s.dataDir, "pg_hba.conf")
	initdbs, err := os.ReadFile(name)
	if err != nil {
		return fmt.Errorf("pgtest: pg_hba.conf: %w", err)
	}
	var b strings.Builder
	for _, l := range s.opts.HBAFirst {
		b.WriteString(l + "\n")
	}
	b.Write(initdbs)
	for _, l := range s.opts.HBA {
		b.WriteString(l + "\n")
	}
	// WriteFile keeps the file's owner (the server's user when run as root) and mode.
	if err := os.WriteFile(name, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("pgtest: pg_hba.conf: %w", err)
	}
	return nil
}

// dropRootPrivileges: initdb and postgres refuse to run as root, so when the tests run
// as root the server runs as the "postgres" system user (created by the Debian package).
func (s *Server) dropRootPrivileges() error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("pgtest: running as root needs the 'postgres' system user (run hack/install-postgres.sh): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return nil
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteRune('_')
		}
		if b.Len() >= 30 {
			break
		}
	}
	if b.Len() == 0 {
		return "db"
	}
	return b.String()
}
