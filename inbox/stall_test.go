package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/inbox"
	"github.com/outbox-operator/outbox-operator/internal/pgerr"
	"github.com/outbox-operator/outbox-operator/internal/testenv/logtest"
)

// hangingGateway is a loopback HTTP server that never answers: every call to it
// ends in the caller's timeout, as a payment gateway's does when it is overloaded.
func hangingGateway(t *testing.T) *httptest.Server {
	t.Helper()
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(gw.Close)
	return gw
}

// timeoutCase is a handler step that always times out, with the park code and
// attempts its message must end with.
type timeoutCase struct {
	name     string
	fn       func(ctx context.Context, tx *sql.Tx) error
	code     string
	attempts int
}

// timeoutHandlers are handlers whose outside call or own statement always times
// out, each returning the real error such a call returns.
func timeoutHandlers(t *testing.T, attempts int) []timeoutCase {
	gw := hangingGateway(t)
	return []timeoutCase{
		{"deadline exceeded", func(ctx context.Context, _ *sql.Tx) error {
			cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			req, err := http.NewRequestWithContext(cctx, http.MethodPost, gw.URL, nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				return errors.New("the hanging gateway answered")
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("want a deadline, got %w", err)
			}
			return fmt.Errorf("credit gateway: %w", err)
		}, inbox.CodeRetriesExhausted, attempts},
		{"net.Error timeout", func(ctx context.Context, _ *sql.Tx) error {
			client := &http.Client{Timeout: 20 * time.Millisecond}
			resp, err := client.Post(gw.URL, "application/json", nil)
			if err == nil {
				resp.Body.Close()
				return errors.New("the hanging gateway answered")
			}
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return fmt.Errorf("want a net.Error timeout, got %w", err)
			}
			return err
		}, inbox.CodeRetriesExhausted, attempts},
		{"57014 from the handler's statement", func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `SET LOCAL statement_timeout = 1`); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `SELECT pg_sleep(1)`)
			if !pgerr.Is(err, pgerr.QueryCanceled) {
				return fmt.Errorf("want 57014, got %v", err)
			}
			return fmt.Errorf("credit limit lookup: %w", err)
		}, inbox.CodeRetriesExhausted, attempts},
		{"Permanent around a deadline", func(ctx context.Context, _ *sql.Tx) error {
			return inbox.Permanent(fmt.Errorf("credit gateway refused for good: %w", context.DeadlineExceeded))
		}, inbox.CodePermanent, 1},
	}
}

// TestHandlerTimeoutIsParkedWhileLaterMessagesFlow: the handler of the first
// message always times out (its gateway call, or its own statement); it is tried
// MaxAttempts times (Permanent: once), parked, and the 100 messages behind it on its
// partition are applied, one per transaction and in batches of 500. Every offset is
// committed; nothing is taken for a consumer database fault.
func TestHandlerTimeoutIsParkedWhileLaterMessagesFlow(t *testing.T) {
	const maxAttempts = 3
	for _, batch := range []int{1, 500} {
		for _, h := range timeoutHandlers(t, maxAttempts) {
			t.Run(fmt.Sprintf("%s/batch %d", h.name, batch), func(t *testing.T) {
				db, s := setup(t)
				msgs := []kafka.Message{event{"stuck", "u0", 1, `{}`}.kafka("")}
				for i := 1; i <= 100; i++ {
					msgs = append(msgs, event{id(i), "u" + id(i%7), int64(i/7 + 1), `{}`}.kafka(""))
				}
				b := topicWith(t, 1, msgs...)
				var calls int
				fn := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
					if m.EventID == "stuck" {
						calls++
						return "", h.fn(ctx, tx)
					}
					_, err := tx.ExecContext(ctx, `INSERT INTO points VALUES ($1, 10) ON CONFLICT (user_id) DO UPDATE SET total = points.total + 10`, m.AggregateID)
					return "", err
				}
				tl := newTally(101)
				o := fastOptions(tl)
				var logs logtest.Lines
				o.MaxAttempts, o.BatchSize, o.Metrics, o.Log = maxAttempts, batch, inbox.NewMetrics(), logs.Logger()
				c, err := inbox.NewConsumer(s, fn, o)
				if err != nil {
					t.Fatal(err)
				}
				r := reader(b, "points")
				defer r.Close()
				runUntil(t, c, r, tl)
				if tl.get(inbox.Applied)+tl.get(inbox.Gap) != 100 || tl.get(inbox.Parked) != 1 {
					t.Fatalf("outcomes %v: want 100 applied and the stuck one parked", tl.by)
				}
				var code string
				var attempts int
				if err := db.QueryRow(`SELECT error_code, attempts FROM message_consume_parked WHERE event_id = 'stuck' AND status = 'PARKED'`).Scan(&code, &attempts); err != nil {
					t.Fatalf("stuck message not parked: %v", err)
				}
				if code != h.code || attempts != h.attempts {
					t.Fatalf("parked with code %s after %d attempts, want %s after %d", code, attempts, h.code, h.attempts)
				}
				if want := h.attempts + min(batch-1, 1); calls != want { // a batch first tries it once with the others
					t.Fatalf("handler called %d times for the stuck message, want %d", calls, want)
				}
				var sum int
				if err := db.QueryRow(`SELECT coalesce(sum(total), 0) FROM points`).Scan(&sum); err != nil || sum != 1000 {
					t.Fatalf("sum %d (%v), want 1000", sum, err)
				}
				if n := value(t, o.Metrics.Counter("inbox_store_fault_total", "points", "payments")); n != 0 {
					t.Fatalf("%v handler failures taken for consumer database faults", n)
				}
				if n := logs.Count(`"msg":"message failed; retrying"`, `"eventId":"stuck"`, `"source":"handler"`); n != h.attempts-1 {
					t.Errorf("%d retry lines for the stuck message say the handler failed, want %d", n, h.attempts-1)
				}
				if n := logs.Count(`consumer database failed`); n != 0 {
					t.Errorf("%d log lines blame the consumer database for a handler error", n)
				}
				nothingLeft(t, b, "points")
			})
		}
	}
}

// TestGatewayTimeoutWithDefaultOptions is the reproduction as a new user
// writes it: default Options but BatchSize 500, one message whose handler always
// returns fmt.Errorf("credit gateway: %w", context.DeadlineExceeded), then 100 normal
// messages on its partition. All 100 are applied and the stuck one parked within 10 s.
func TestGatewayTimeoutWithDefaultOptions(t *testing.T) {
	db, s := setup(t)
	msgs := []kafka.Message{event{"stuck", "u0", 1, `{}`}.kafka("")}
	for i := 1; i <= 100; i++ {
		msgs = append(msgs, event{id(i), "u" + id(i), 1, `{}`}.kafka(""))
	}
	b := topicWith(t, 1, msgs...)
	firstCall := make(chan struct{})
	var once sync.Once
	fn := func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
		if m.EventID == "stuck" {
			once.Do(func() { close(firstCall) })
			return "", fmt.Errorf("credit gateway: %w", context.DeadlineExceeded)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO points VALUES ($1, 10)`, m.AggregateID)
		return "", err
	}
	tl := newTally(101)
	c, err := inbox.NewConsumer(s, fn, inbox.Options{BatchSize: 500, Observe: tl.observe})
	if err != nil {
		t.Fatal(err)
	}
	startRun(t, c, reader(b, "points"))
	// The clock starts at the first call of the handler: the group join is not the
	// consumer's doing.
	select {
	case <-firstCall:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler was not called within 30 s")
	}
	select {
	case <-tl.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("outcomes after 10 s: %v, want 100 applied and 1 parked", tl.by)
	}
	if got := parkedRows(t, db, "points"); got["stuck"] != inbox.CodeRetriesExhausted || tl.get(inbox.Applied) != 100 {
		t.Fatalf("parked %v, outcomes %v", got, tl.by)
	}
}
