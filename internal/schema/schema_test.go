package schema

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { pgtest.Main(m, &srv) }

func open(t *testing.T) *sql.DB {
	t.Helper()
	_, db := srv.OpenDatabase(t)
	return db
}

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	db := open(t)
	tb, _ := pgident.NewTable("app", "outbox_event")
	ctx := context.Background()
	if err := Verify(ctx, db, tb); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Verify before migrate = %v, want 'does not exist'", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- Migrate(ctx, db, tb, Options{NotifyTrigger: true}) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := Migrate(ctx, db, tb, Options{NotifyTrigger: true}); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if err := Verify(ctx, db, tb); err != nil {
		t.Fatal(err)
	}
	for _, side := range []string{"outbox_event_archive", "outbox_event_archive_runs", "outbox_event_replay_audit", "message_consume"} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_schema='app' AND table_name=$1`, side).Scan(&n); err != nil || n != 1 {
			t.Fatalf("side table %s: n=%d err=%v", side, n, err)
		}
	}
}

// A table name of the longest allowed length still gets every side table and index
// under its own name (PostgreSQL silently truncates identifiers to 63 bytes).
func TestLongestTableNameGetsAllSideObjects(t *testing.T) {
	db := open(t)
	name := strings.Repeat("x", pgident.MaxLen-len(ReplayAuditSuffix))
	tb, err := pgident.NewTable("public", name)
	if err != nil {
		t.Fatal(err)
	}
	if err := Migrate(context.Background(), db, tb, Options{}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM pg_indexes WHERE schemaname = 'public' AND tablename = $1`,
		name+ArchiveRunsSuffix).Scan(&n); err != nil || n != 2 {
		t.Fatalf("indexes on the runs table: n=%d err=%v, want primary key and policy index", n, err)
	}
}

// The contract promises that a plain INSERT of the first nine columns works and that
// the defaults put the row straight into the dispatch state.
func TestPlainInsertOfNineColumns(t *testing.T) {
	db := open(t)
	tb, _ := pgident.NewTable("public", "outbox_event")
	ctx := context.Background()
	if err := Migrate(ctx, db, tb, Options{}); err != nil {
		t.Fatal(err)
	}
	_, err := db.Exec(`INSERT INTO public.outbox_event VALUES ('e1','Order','o1',1,'OrderCreated',1,'orders','o1','{"a":1}')`)
	if err != nil {
		t.Fatal(err)
	}
	var status string
	var retries int
	var due bool
	if err := db.QueryRow(`SELECT status, retry_count, next_retry_at <= now() FROM public.outbox_event WHERE event_id='e1'`).Scan(&status, &retries, &due); err != nil {
		t.Fatal(err)
	}
	if status != StatusPending || retries != 0 || !due {
		t.Fatalf("defaults: status=%s retries=%d due=%v", status, retries, due)
	}
	_, err = db.Exec(`INSERT INTO public.outbox_event VALUES ('e2','Order','o1',1,'OrderCreated',1,'orders','o1','{}')`)
	if pqErr, ok := err.(*pq.Error); !ok || pqErr.Code != "23505" {
		t.Fatalf("duplicate aggregate version: err=%v, want unique violation", err)
	}
}

func TestNotifyTriggerWakesListener(t *testing.T) {
	dsn, db := srv.OpenDatabase(t)
	tb, _ := pgident.NewTable("public", "ob")
	if err := Migrate(context.Background(), db, tb, Options{NotifyTrigger: true}); err != nil {
		t.Fatal(err)
	}
	l := pq.NewListener(dsn, 10*time.Millisecond, time.Second, nil)
	defer l.Close()
	if err := l.Listen(Channel(tb)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO public.ob VALUES ('e1','A','1',1,'T',1,'d','k','{}'), ('e2','A','1',2,'T',1,'d','k','{}')`); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-l.Notify:
		if n == nil || n.Channel != "ob" {
			t.Fatalf("notification %+v", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification within 5s")
	}
}
