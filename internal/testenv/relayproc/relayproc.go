// Package relayproc runs the real relayworker binary as a child process for tests
// that need a process (exit codes, SIGTERM, kill -9, SIGSTOP): it builds the binary,
// spawns and stops workers, runs one-shot commands and reads the workers' HTTP
// endpoints and Prometheus metrics.
package relayproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/freeport"
)

// Package is the import path of the relayworker command.
const Package = "github.com/outbox-operator/outbox-operator/cmd/relayworker"

// Build compiles relayworker into dir and returns the binary's path. It runs `go
// build` from the current directory, which must be inside this module (as a test's is).
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "relayworker")
	if out, err := exec.Command("go", "build", "-o", bin, Package).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build relayworker: %w\n%s", err, out)
	}
	return bin, nil
}

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

// Proc is a running relayworker process.
type Proc struct {
	Cmd    *exec.Cmd
	stderr lockedBuffer
	done   chan struct{}
}

// Spawn starts bin with exactly env and args; the process is SIGKILLed (and SIGCONTed,
// in case a test stopped it) at test end if still running.
func Spawn(t testing.TB, bin string, env []string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Process.Signal(syscall.SIGCONT)
		<-p.done
	})
	return p
}

// Stderr is everything the process wrote to stderr so far.
func (p *Proc) Stderr() string { return p.stderr.String() }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.Cmd.Process.Signal(sig) }

// Stop sends SIGTERM and waits for a clean exit (code 0), failing t otherwise.
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("relayworker did not exit 30s after SIGTERM; stderr:\n%s", p.Stderr())
	}
	if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("relayworker exit code %d; stderr:\n%s", code, p.Stderr())
	}
}

// Run executes bin with exactly env and args, waits up to 30s, and returns the exit
// code and stderr.
func Run(t testing.TB, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stderr.String()
}

// FreeAddr returns a loopback host:port that was free a moment ago, below the
// kernel's ephemeral range (freeport), so no client connection takes it before the
// worker binds it.
func FreeAddr(t testing.TB) string {
	t.Helper()
	a, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// HTTPGet returns status code and body; code 0 when the request failed (not
// listening yet).
func HTTPGet(url string) (int, string) {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Sample is one line of the Prometheus text exposition.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// ParseMetrics reads the text format; only what the assertions need.
func ParseMetrics(body string) ([]Sample, error) {
	var out []Sample
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("unparsable metrics line %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		s := Sample{Name: m[1], Labels: map[string]string{}, Value: v}
		for _, lp := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.Labels[lp[1]] = lp[2]
		}
		out = append(out, s)
	}
	return out, nil
}

// Sum adds the samples of name whose labels include want.
func Sum(ss []Sample, name string, want map[string]string) (float64, bool) {
	var total float64
	found := false
	for _, s := range ss {
		if s.Name != name {
			continue
		}
		ok := true
		for k, v := range want {
			if s.Labels[k] != v {
				ok = false
			}
		}
		if ok {
			total += s.Value
			found = true
		}
	}
	return total, found
}

// Metric scrapes url (a /metrics endpoint) and returns Sum(name, want); found is false
// when the endpoint did not answer or has no such sample.
func Metric(url, name string, want map[string]string) (v float64, found bool) {
	code, body := HTTPGet(url)
	if code != http.StatusOK {
		return 0, false
	}
	ss, err := ParseMetrics(body)
	if err != nil {
		return 0, false
	}
	return Sum(ss, name, want)
}
