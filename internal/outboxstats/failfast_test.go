package outboxstats

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// hungServer is a private server (it gets frozen) with a database of n outbox tables.
func hungServer(t *testing.T, n int) (*pgtest.Server, string, *sql.DB, []pgident.Table) {
	t.Helper()
	own, err := pgtest.Start(pgtest.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = own.Stop() })
	dsn, admin := own.OpenDatabase(t)
	var tables []pgident.Table
	for i := range n {
		tb, _ := pgident.NewTable("public", fmt.Sprintf("outbox_%d", i))
		if err := schema.Migrate(context.Background(), admin, tb, schema.Options{}); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, tb)
	}
	return own, dsn, admin, tables
}

// readTable is one pipeline's status read through p, with how long it took.
func readTable(p *Pools, dsn string, tb pgident.Table) (time.Duration, error) {
	start := time.Now()
	err := p.Read(context.Background(), "ns/"+tb.String(), dsn, func(db *sql.DB) error {
		_, err := Read(context.Background(), db, tb)
		return err
	})
	return time.Since(start), err
}

// A database whose server hangs (SIGSTOP: connections stay open, nothing answers)
// costs one bounded read, not one per pipeline: the reads after it fail at once, and
// once the server is back and failFastFor has passed, reads succeed again.
func TestHungDatabaseFailsFast(t *testing.T) {
	own, dsn, _, tables := hungServer(t, 6)
	p := NewPoolsMax(3)
	p.failFastFor = 3 * time.Second
	defer p.Close()
	for _, tb := range tables {
		if _, err := readTable(p, dsn, tb); err != nil {
			t.Fatal(err)
		}
	}
	if err := own.Freeze(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = own.Thaw() })

	took, err := readTable(p, dsn, tables[0])
	if !errors.Is(err, ErrDatabaseUnresponsive) {
		t.Fatalf("first read of the hung database: %v after %s, want ErrDatabaseUnresponsive", err, took)
	}
	if took > Timeout+probeTimeout+2*time.Second {
		t.Errorf("first read took %s: it must be bounded by the read's timeout and the ping's (%s + %s)", took, Timeout, probeTimeout)
	}
	t.Logf("first read on the hung database: %s", took)
	for _, tb := range tables[1:] {
		took, err := readTable(p, dsn, tb)
		if !errors.Is(err, ErrDatabaseUnresponsive) || took >= Timeout {
			t.Errorf("%s: %v after %s, want ErrDatabaseUnresponsive at once, without waiting out its %s", tb, err, took, Timeout)
		}
	}

	if err := own.Thaw(); err != nil {
		t.Fatal(err)
	}
	relaytest.Eventually(t, 20*time.Second, "reads to succeed after the server is back", func() bool {
		_, err := readTable(p, dsn, tables[1])
		return err == nil
	})
}

// A read that times out on a lock of its own table, while the database answers, marks
// nothing: the other pipelines on the database read as usual.
func TestLockedTableDoesNotFailTheDatabase(t *testing.T) {
	_, dsn, admin, tables := hungServer(t, 2)
	p := NewPoolsMax(3)
	defer p.Close()
	tx, err := admin.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // ends the lock
	if _, err := tx.Exec(`LOCK TABLE ` + tables[0].Qualified() + ` IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if took, err := readTable(p, dsn, tables[0]); err == nil || errors.Is(err, ErrDatabaseUnresponsive) {
		t.Fatalf("read of the locked table: %v after %s, want its timeout and not ErrDatabaseUnresponsive", err, took)
	}
	if took, err := readTable(p, dsn, tables[1]); err != nil {
		t.Fatalf("read of another table after the timeout: %v after %s", err, took)
	}
}
