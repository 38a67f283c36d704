package payments_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/outbox-operator/outbox-operator/examples/payments"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/cli"
	"github.com/outbox-operator/outbox-operator/internal/testenv/kafkatest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { pgtest.Main(m, &srv) }

const topic = payments.DefaultTopic

// stack is one test's real parts: a database of the private PostgreSQL with the
// outbox and example tables, a kfake broker with the topic, and the relay worker
// (the real `relayworker relay`, in-process) publishing the outbox table.
type stack struct {
	dsn    string
	db     *sql.DB
	broker *kafkatest.Broker
	logs   *logBuffer // everything the relay and the example logged
}

func newStack(t *testing.T) *stack {
	t.Helper()
	dsn, db := srv.OpenDatabase(t)
	b, err := kafkatest.Start(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.CreateTopic(topic, 3); err != nil {
		t.Fatal(err)
	}
	s := &stack{dsn: dsn, db: db, broker: b, logs: &logBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", s.logs.String())
		}
	})
	s.relayworker(t, "migrate")
	if err := payments.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	s.startRelay(t)
	return s
}

// relayworker runs a one-shot relayworker command against the stack.
func (s *stack) relayworker(t *testing.T, cmd string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cli.Run(ctx, append([]string{cmd, "--dsn", s.dsn}, args...), noEnv, s.logs, s.logs); err != nil {
		t.Fatalf("relayworker %s: %v", cmd, err)
	}
}

// startRelay runs `relayworker relay` until the test ends. It is the worker a pod
// runs, with its endpoints off (no ports to collide on).
func (s *stack) startRelay(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cli.Run(ctx, []string{"relay", "--dsn", s.dsn, "--brokers", s.broker.AddrList(),
			"--metrics-addr", "", "--health-addr", "", "--poll-interval", "200ms", "--worker-id", "payments-test",
			"--pipeline", "payments"}, noEnv, s.logs, s.logs)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("relay: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("relay did not stop within 30s")
		}
	})
}

// noEnv keeps the test's environment away from the relay's flags.
func noEnv(string) (string, bool) { return "", false }

// logBuffer collects log lines from many goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// logger is the example's logr.Logger, writing JSON lines into the buffer.
func (l *logBuffer) logger() logr.Logger {
	return funcr.NewJSON(func(obj string) { fmt.Fprintln(l, obj) }, funcr.Options{})
}

// eventually polls cond every 100ms until it returns "" (done) or the deadline; the
// last answer says what was still missing.
func eventually(t *testing.T, within time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		missing := cond()
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %s", what, within, missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// noSecretsIn fails t if the logs quote the DSN or anything of the payloads.
func noSecretsIn(t *testing.T, logs, dsn string) {
	t.Helper()
	for _, s := range []string{dsn, "+4915550", payments.PoisonCurrency, "amountCents", "Payment received"} {
		if strings.Contains(logs, s) {
			t.Errorf("logs contain %q (a DSN or payload content)", s)
		}
	}
}
