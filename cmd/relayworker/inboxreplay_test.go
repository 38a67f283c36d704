package main_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/inbox"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// feed hands a real inbox.Consumer the messages sent on it, then nothing until its
// Run ends: the consumer's Kafka side is not what these tests are about.
type feed struct{ ch chan kafka.Message }

func (f *feed) FetchMessage(ctx context.Context) (kafka.Message, error) {
	select {
	case m := <-f.ch:
		return m, nil
	case <-ctx.Done():
		return kafka.Message{}, ctx.Err()
	}
}

func (f *feed) CommitMessages(context.Context, ...kafka.Message) error { return nil }

func payment(id string, offset int64) kafka.Message {
	h := func(k, v string) kafka.Header { return kafka.Header{Key: k, Value: []byte(v)} }
	return kafka.Message{Topic: "payments", Offset: offset, Key: []byte("u1"), Value: []byte(`{"amount":5}`), Headers: []kafka.Header{
		h(inbox.HeaderEventID, id), h(inbox.HeaderEventType, "PaymentSucceeded"), h(inbox.HeaderEventVersion, "1"),
		h(inbox.HeaderAggregateType, "User"), h(inbox.HeaderAggregateID, "u1"), h(inbox.HeaderAggregateVersion, "1"),
	}}
}

func inboxDB(t *testing.T) (string, *sql.DB) {
	t.Helper()
	dsn, db := relaytest.PG.OpenDatabase(t)
	if err := inbox.Migrate(context.Background(), db, "public"); err != nil {
		t.Fatal(err)
	}
	return dsn, db
}

// startConsumer runs a consumer of group billing whose handler refuses every message
// (Permanent, so it parks at once) while broken is set, and counts what it applied.
func startConsumer(t *testing.T, db *sql.DB, broken *atomic.Bool) (*feed, *atomic.Int32) {
	t.Helper()
	s, err := inbox.New(db, "public", "billing")
	if err != nil {
		t.Fatal(err)
	}
	var applied atomic.Int32
	fn := func(context.Context, *sql.Tx, inbox.Message) (string, error) {
		if broken.Load() {
			return "", inbox.Permanent(errors.New("unknown currency"))
		}
		applied.Add(1)
		return "ok", nil
	}
	c, err := inbox.NewConsumer(s, fn, inbox.Options{ReplayPoll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f := &feed{ch: make(chan kafka.Message, 8)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, f) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("consumer Run: %v", err)
		}
	})
	return f, &applied
}

func parkedStatus(t *testing.T, db *sql.DB, eventID string) string {
	t.Helper()
	var st string
	if err := db.QueryRow(`SELECT status FROM message_consume_parked WHERE consumer_group = 'billing' AND event_id = $1`, eventID).Scan(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func countRequests(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM message_consume_replay WHERE consumer_group = 'billing'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A message parked by the consumer is replayed by that running consumer when
// `inbox-replay` asks: exit 0, the row REPLAYED, the handler's effect once. A re-run
// with the same replay id (a retried Job) finds the finished request and asks nothing.
func TestInboxReplayIsServedByTheRunningConsumer(t *testing.T) {
	dsn, db := inboxDB(t)
	var broken atomic.Bool
	broken.Store(true)
	f, applied := startConsumer(t, db, &broken)
	f.ch <- payment("pay-1", 1)
	relaytest.Eventually(t, 10*time.Second, "pay-1 parked", func() bool {
		var n int
		_ = db.QueryRow(`SELECT count(*) FROM message_consume_parked WHERE status = 'PARKED'`).Scan(&n)
		return n == 1
	})
	broken.Store(false) // the fix is deployed

	args := []string{"inbox-replay", "--group=billing", "--error-code=permanent", "--reason=INC-9 currency table fixed",
		"--replay-id=shop/fix-billing/u-1", "--requested-by=oncall@example.com", "--poll-interval=50ms", "--wait-timeout=60s"}
	code, stderr := run(t, []string{"INBOX_DSN=" + dsn}, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{`"msg":"replay requested"`, `"msg":"replay progress"`, `"msg":"replay finished"`,
		`"replayId":1`, `"selected":1`, `"applied":1`, `"duplicates":0`, `"failed":0`, `"consumerGroup":"billing"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("log lacks %s:\n%s", want, stderr)
		}
	}
	if st := parkedStatus(t, db, "pay-1"); st != inbox.ParkedReplayed || applied.Load() != 1 {
		t.Fatalf("parked row %s, handler applied %d times: want REPLAYED and once", st, applied.Load())
	}
	var by, key string
	if err := db.QueryRow(`SELECT requested_by, request_key FROM message_consume_replay`).Scan(&by, &key); err != nil ||
		by != "oncall@example.com" || key != "shop/fix-billing/u-1" {
		t.Fatalf("requested_by %q, request_key %q (%v)", by, key, err)
	}

	code, stderr = run(t, []string{"INBOX_DSN=" + dsn}, args...)
	if code != 0 || !strings.Contains(stderr, "resuming the replay request of an earlier run") || countRequests(t, db) != 1 {
		t.Fatalf("re-run: exit %d, %d requests: %s", code, countRequests(t, db), stderr)
	}
}

// Without a running consumer of the group nobody takes the request: the wait timeout
// ends the command with exit 1 and says so; the message stays parked.
func TestInboxReplayWithoutConsumerTimesOut(t *testing.T) {
	dsn, db := inboxDB(t)
	if _, err := db.Exec(`INSERT INTO message_consume_parked
	    (consumer_group, topic, kafka_partition, kafka_offset, event_id, event_type, error_code, error_message, attempts)
	    VALUES ('billing', 'payments', 0, 7, 'pay-7', 'PaymentSucceeded', 'permanent', 'unknown currency', 1)`); err != nil {
		t.Fatal(err)
	}
	code, stderr := run(t, []string{"INBOX_DSN=" + dsn}, "inbox-replay", "--group=billing", "--event-ids=pay-7",
		"--reason=INC-9 currency table fixed", "--poll-interval=50ms", "--wait-timeout=1s")
	line := oneLine(t, stderr)
	if code != 1 || !strings.Contains(line, `no consumer of group "billing" took replay request`) || !strings.Contains(line, "within 1s") {
		t.Fatalf("exit %d line %q; want exit 1 saying no consumer took the request", code, line)
	}
	if !strings.Contains(stderr, `"status":"REQUESTED"`) {
		t.Errorf("no progress line with status REQUESTED:\n%s", stderr)
	}
	if st := parkedStatus(t, db, "pay-7"); st != inbox.ParkedOpen {
		t.Fatalf("parked row %s, want still PARKED", st)
	}
}

func TestInboxReplayBadInput(t *testing.T) {
	bare := relaytest.PG.NewDatabase(t) // no inbox tables
	secretDSN := "postgres://app:s3cret@127.0.0.1:1/db?sslmode=disable&connect_timeout=2"
	ok := []string{"inbox-replay", "--group=billing", "--event-type=PaymentSucceeded", "--reason=INC-9 fixed"}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"no dsn", nil, ok, 2, "INBOX_DSN (the consumer database's DSN) is required"},
		{"dsn as a flag", nil, append(ok, "--dsn="+secretDSN), 2, "flag provided but not defined: -dsn"},
		{"no selector", []string{"INBOX_DSN=" + bare}, []string{"inbox-replay", "--group=billing", "--reason=INC-9 fixed"}, 2, "replay selector is empty"},
		{"rate too low", []string{"INBOX_DSN=" + bare}, append(ok, "--rate=0.01"), 2, "--rate"},
		{"unreachable", []string{"INBOX_DSN=" + secretDSN}, ok, 1, "database unreachable"},
		{"tables missing", []string{"INBOX_DSN=" + bare}, ok, 1, "inbox tables are missing in schema \"public\""},
	} {
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
