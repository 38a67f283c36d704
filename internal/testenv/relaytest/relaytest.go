// Package relaytest holds helpers shared by the relay's integration tests and the
// benchmark: a private PostgreSQL per test binary, fresh migrated databases, event
// inserts and an Eventually-style poll.
package relaytest

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
)

// PG is the package's private server, set by Main.
var PG *pgtest.Server

// Main starts one private PostgreSQL for the test binary, runs the tests, stops it.
func Main(m *testing.M) { pgtest.Main(m, &PG) }

// DefaultTable is public.outbox_event.
var DefaultTable = pgident.Table{Schema: "public", Name: "outbox_event"}

// NewDB creates a database, migrates the default outbox table into it and returns the
// DSN and an open handle (closed at test end).
func NewDB(t testing.TB) (string, *sql.DB) {
	t.Helper()
	dsn, db := PG.OpenDatabase(t)
	if err := schema.Migrate(context.Background(), db, DefaultTable, schema.Options{}); err != nil {
		t.Fatal(err)
	}
	return dsn, db
}

// Ev is a compact event for tests.
type Ev struct {
	ID, AggType, AggID string
	Version            int64
	Topic              string
	Payload            string // JSON; default {"n":1}
	Headers            *string
}

// Execer is what an insert runs on: a pool (one transaction of its own), an open
// transaction or a connection (a transaction a test prepares or holds open).
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Insert inserts events with plain SQL (one statement).
func Insert(t testing.TB, db Execer, evs ...Ev) {
	t.Helper()
	if err := InsertErr(db, evs...); err != nil {
		t.Fatal(err)
	}
}

// InsertErr is Insert returning the error.
func InsertErr(db Execer, evs ...Ev) error {
	if len(evs) == 0 {
		return nil
	}
	var sb strings.Builder
	sb.WriteString(`INSERT INTO public.outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload, headers) VALUES `)
	args := make([]any, 0, len(evs)*8)
	for i, e := range evs {
		if i > 0 {
			sb.WriteString(",")
		}
		n := len(args)
		fmt.Fprintf(&sb, "($%d,$%d,$%d,$%d,'test.event',$%d,$%d,$%d::jsonb,$%d::jsonb)", n+1, n+2, n+3, n+4, n+5, n+3, n+6, n+7)
		if e.AggType == "" {
			e.AggType = "order"
		}
		if e.Payload == "" {
			e.Payload = `{"n":1}`
		}
		var h any
		if e.Headers != nil {
			h = *e.Headers
		}
		args = append(args, e.ID, e.AggType, e.AggID, e.Version, e.Topic, e.Payload, h)
	}
	_, err := db.ExecContext(context.Background(), sb.String(), args...)
	return err
}

// Many builds n events with distinct aggregates on topic.
func Many(prefix, topic string, n int) []Ev {
	out := make([]Ev, n)
	for i := range out {
		out[i] = Ev{ID: fmt.Sprintf("%s-%d", prefix, i), AggID: fmt.Sprintf("%s-agg-%d", prefix, i), Version: 1, Topic: topic}
	}
	return out
}

// Eventually polls cond every 20ms until it returns true or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CountStatus returns the number of rows per status.
func CountStatus(t testing.TB, db *sql.DB) map[string]int {
	t.Helper()
	rows, err := db.Query(`SELECT status, count(*) FROM public.outbox_event GROUP BY status`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		m[s] = n
	}
	return m
}

// MigrateDefault migrates public.outbox_event into db.
func MigrateDefault(db *sql.DB) error {
	return schema.Migrate(context.Background(), db, DefaultTable, schema.Options{})
}
