package outboxstats

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

func TestReadLastArchiveRun(t *testing.T) {
	ctx := context.Background()
	_, db := srv.OpenDatabase(t)
	tbl, _ := pgident.NewTable("app", "outbox_event")

	if _, found, err := ReadLastArchiveRun(ctx, db, tbl, "shop/orders"); found || err != nil {
		t.Fatalf("missing table is no runs: found=%v err=%v", found, err)
	}
	if err := schema.Migrate(ctx, db, tbl, schema.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, found, err := ReadLastArchiveRun(ctx, db, tbl, "shop/orders"); found || err != nil {
		t.Fatalf("no runs yet: found=%v err=%v", found, err)
	}
	if _, err := db.Exec(`INSERT INTO app.outbox_event_archive_runs
		(policy, mode, started_at, finished_at, sent_moved, dead_moved, consumer_log_trimmed, error) VALUES
		('shop/orders', 'archive', now() - interval '2 hours', now() - interval '2 hours', 1, 1, 1, NULL),
		('shop/orders', 'archive', now() - interval '10 minutes', now() - interval '9 minutes', 40, 2, 7, 'archive DEAD rows: boom'),
		('shop/other',  'delete',  now(), now(), 99, 99, 99, NULL)`); err != nil {
		t.Fatal(err)
	}
	r, found, err := ReadLastArchiveRun(ctx, db, tbl, "shop/orders")
	if err != nil || !found {
		t.Fatalf("found=%v err=%v", found, err)
	}
	if r.Mode != "archive" || r.SentMoved != 40 || r.DeadMoved != 2 || r.ConsumerLogTrimmed != 7 || r.Error != "archive DEAD rows: boom" {
		t.Fatalf("newest run %+v", r)
	}
	if age := time.Since(r.FinishedAt); age < 8*time.Minute || age > 10*time.Minute || !r.StartedAt.Before(r.FinishedAt) {
		t.Fatalf("times %v .. %v", r.StartedAt, r.FinishedAt)
	}
}

func TestReadLastArchiveRunUnreachableIsBoundedAndRedacted(t *testing.T) {
	p := NewPools()
	defer p.Close()
	db, err := p.Get("ns/x", "postgres://relay:s3cretpw@127.0.0.1:1/app?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, found, err := ReadLastArchiveRun(context.Background(), db, pgident.Table{Schema: "public", Name: "outbox_event"}, "ns/x")
	if err == nil || found {
		t.Fatalf("found=%v err=%v, want an error", found, err)
	}
	if time.Since(start) > 4*time.Second || strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("took %v, err %v", time.Since(start), err)
	}
}
