package main_test

import (
	"bytes"
	"database/sql"
	"io"
	"net/http"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer collects a child's stderr; the test reads it while exec's copying
// goroutine may still write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// child is a running relayworker process.
type child struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan struct{}
}

// spawn starts relayworker with exactly env and args; the process is killed at test
// end if still running.
func spawn(t *testing.T, env []string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	c := &child{cmd: cmd, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.done
	})
	return c
}

// stop sends SIGTERM and waits for a clean exit.
func (c *child) stop(t *testing.T) {
	t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("relayworker did not exit 30s after SIGTERM; stderr:\n%s", c.stderr)
	}
	if code := c.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("relayworker exit code %d; stderr:\n%s", code, c.stderr)
	}
}

// httpGet returns status code and body; code 0 when the request failed (not
// listening yet).
func httpGet(url string) (int, string) {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// rowState is the relay-visible state of one outbox row.
type rowState struct {
	status, code, msg string
	retries           int
	// delay is next_retry_at - updated_at: the backoff the relay stored with its mark.
	delay time.Duration
}

func stateOf(t *testing.T, db *sql.DB, id string) rowState {
	t.Helper()
	var s rowState
	var code, msg sql.NullString
	var ms float64
	err := db.QueryRow(`SELECT status, last_error_code, last_error_message, retry_count,
		EXTRACT(EPOCH FROM next_retry_at - updated_at) * 1000
		FROM public.outbox_event WHERE event_id = $1`, id).Scan(&s.status, &code, &msg, &s.retries, &ms)
	if err != nil {
		t.Fatal(err)
	}
	s.code, s.msg, s.delay = code.String, msg.String, time.Duration(ms*float64(time.Millisecond))
	return s
}
