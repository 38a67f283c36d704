package outboxstats

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// operatorConns counts the operator's connections to the database admin is on, by
// the application_name Pools gives them; active counts those running a statement.
func operatorConns(admin *sql.DB) (open, active int, err error) {
	err = admin.QueryRow(`SELECT count(*), count(*) FILTER (WHERE state = 'active') FROM pg_stat_activity
		WHERE application_name = $1 AND datname = current_database()`, ApplicationName).Scan(&open, &active)
	return open, active, err
}

func mustOperatorConns(t *testing.T, admin *sql.DB) int {
	t.Helper()
	open, _, err := operatorConns(admin)
	if err != nil {
		t.Fatal(err)
	}
	return open
}

// 60 pipelines on one database, all reading their status at once, three passes: one
// pool, never more than the bound's connections, never more status reads at a time
// than MaxReads.
func TestPipelinesOnOneDatabaseShareABoundedPool(t *testing.T) {
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	admin, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var tables []pgident.Table
	for i := range 4 {
		tb, _ := pgident.NewTable("public", fmt.Sprintf("outbox_%d", i))
		if err := schema.Migrate(ctx, admin, tb, schema.Options{}); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, tb)
	}
	const bound, pipelines = 3, 60
	p := NewPoolsMax(bound)
	defer p.Close()

	stop := make(chan struct{})
	var maxOpen, maxActive atomic.Int64
	sampled := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				sampled <- nil
				return
			default:
			}
			open, active, err := operatorConns(admin)
			if err != nil {
				sampled <- err
				return
			}
			maxOpen.Store(max(maxOpen.Load(), int64(open)))
			maxActive.Store(max(maxActive.Load(), int64(active)))
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, pipelines)
	for i := range pipelines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				if err := readOnce(ctx, p, fmt.Sprintf("ns-%d/p-%d", i%10, i), dsn, tables[i%len(tables)]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-sampled; err != nil {
		t.Fatalf("sampling pg_stat_activity: %v", err)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := p.Databases(); n != 1 {
		t.Errorf("%d pools for one database, want 1", n)
	}
	if maxOpen.Load() > bound || maxOpen.Load() == 0 {
		t.Errorf("operator connections peaked at %d, want 1..%d", maxOpen.Load(), bound)
	}
	if maxActive.Load() > int64(p.MaxReads()) {
		t.Errorf("%d status reads ran at once, want at most %d", maxActive.Load(), p.MaxReads())
	}
	open := mustOperatorConns(t, admin)
	t.Logf("%d pipelines x 3 reads: %d connections at peak, %d statements at once at peak, %d left open", pipelines, maxOpen.Load(), maxActive.Load(), open)
}

func readOnce(ctx context.Context, p *Pools, key, dsn string, tb pgident.Table) error {
	if err := p.Read(ctx, key, dsn, func(db *sql.DB) error {
		_, err := Read(ctx, db, tb)
		return err
	}); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// A rotated password is a new DSN: the pipeline moves to a new pool at once, the old
// pool stays open while another pipeline still uses it and closes with its last user;
// forgetting every pipeline closes every connection.
func TestRotatedDSNGetsANewPoolAndTheOldClosesWhenUnused(t *testing.T) {
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	rotated := dsn + "&connect_timeout=10"
	admin, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	p := NewPools()
	defer p.Close()
	a, err := p.Get("ns/a", dsn)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := p.Get("ns/b", dsn); err != nil || b != a {
		t.Fatalf("second pipeline on the same DSN: same pool %v, err %v", b == a, err)
	}
	if err := a.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	a2, err := p.Get("ns/a", rotated)
	if err != nil || a2 == a {
		t.Fatalf("rotated DSN: new pool %v, err %v", a2 != a, err)
	}
	if err := a2.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.PingContext(ctx); err != nil {
		t.Fatalf("the old pool closed while ns/b still uses it: %v", err)
	}
	if got := p.Existing("ns/a"); got != a2 {
		t.Fatal("Existing(ns/a) is not the rotated pool")
	}
	if _, err := p.Get("ns/b", rotated); err != nil {
		t.Fatal(err)
	}
	if err := a.PingContext(ctx); err == nil {
		t.Fatal("the old pool is still open after its last user moved")
	}
	if n := p.Databases(); n != 1 {
		t.Fatalf("%d pools, want 1", n)
	}
	p.Forget("ns/a")
	if err := a2.PingContext(ctx); err != nil {
		t.Fatalf("pool closed while ns/b uses it: %v", err)
	}
	p.Forget("ns/b")
	if n := p.Databases(); n != 0 {
		t.Fatalf("%d pools after every user left, want 0", n)
	}
	relaytest.Eventually(t, 10*time.Second, "the operator's connections to close", func() bool {
		return mustOperatorConns(t, admin) == 0
	})
}

// A read waits for a slot while others hold them, and gives up with ErrDatabaseBusy
// after Timeout rather than queueing forever behind reads of a stuck database.
func TestReadSlotsAreBounded(t *testing.T) {
	dsn := srv.NewDatabase(t)
	p := NewPoolsMax(2)
	defer p.Close()
	holding, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- p.Read(context.Background(), "ns/a", dsn, func(*sql.DB) error {
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	start := time.Now()
	err := p.Read(context.Background(), "ns/b", dsn, func(*sql.DB) error { return nil })
	if !errors.Is(err, ErrDatabaseBusy) || time.Since(start) < Timeout {
		t.Fatalf("second read with the one slot taken: %v after %s, want ErrDatabaseBusy after %s", err, time.Since(start), Timeout)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if err := p.Read(context.Background(), "ns/b", dsn, func(*sql.DB) error { return nil }); err != nil {
		t.Fatalf("read after the slot was released: %v", err)
	}
}
