package outboxstats

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { pgtest.Main(m, &srv) }

func insert(t *testing.T, db *sql.DB, tbl pgident.Table, id, status string, extra string) {
	t.Helper()
	_, err := db.Exec(`INSERT INTO `+tbl.Qualified()+` (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload, status`+extra+`)`, id, "order", id, 1, "OrderPlaced", "orders", id, `{}`, status)
	if err != nil {
		t.Fatal(err)
	}
}

func TestRead(t *testing.T) {
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tbl, _ := pgident.NewTable("app", "outbox_event")

	if _, err := Read(ctx, db, tbl); !errors.Is(err, ErrTableMissing) {
		t.Fatalf("missing table: got %v", err)
	}
	if err := schema.Migrate(ctx, db, tbl, schema.Options{}); err != nil {
		t.Fatal(err)
	}
	s, err := Read(ctx, db, tbl)
	if err != nil || s != (Stats{Contract: schema.Contract{Version: schema.ContractV1}}) {
		t.Fatalf("empty table: %+v %v", s, err)
	}
	vals := `) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9`
	insert(t, db, tbl, "p1", "PENDING", vals)
	insert(t, db, tbl, "p2", "PENDING", vals)
	insert(t, db, tbl, "r1", "RETRY", vals)
	insert(t, db, tbl, "d1", "DEAD", vals)
	insert(t, db, tbl, "d2", "DEAD", vals)
	insert(t, db, tbl, "d3", "DEAD", vals)
	insert(t, db, tbl, "s1", "SENDING", `, owner_token, lease_until) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,'tok', now() - interval '1 minute'`)
	insert(t, db, tbl, "s2", "SENDING", `, owner_token, lease_until) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,'tok', now() + interval '1 minute'`)
	insert(t, db, tbl, "x1", "SENT", `, sent_at, created_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9, now(), now() - interval '1 hour'`)
	if _, err := db.Exec(`UPDATE ` + tbl.Qualified() + ` SET created_at = now() - interval '10 minutes' WHERE event_id = 'r1'`); err != nil {
		t.Fatal(err)
	}
	s, err = Read(ctx, db, tbl)
	if err != nil {
		t.Fatal(err)
	}
	if s.Pending != 2 || s.Retrying != 1 || s.Dead != 3 || s.Sending != 2 || s.ExpiredLeases != 1 {
		t.Fatalf("counts: %+v", s)
	}
	if age := time.Since(s.OldestPending); age < 9*time.Minute || age > 11*time.Minute {
		t.Fatalf("oldest pending age %v", age)
	}
	if s.LastPublish.IsZero() {
		t.Fatal("last publish not read")
	}
	if _, found, err := ReadReplayAudit(ctx, db, tbl, "nope"); found || err != nil {
		t.Fatalf("audit: %v %v", found, err)
	}
}

func TestUnreachableIsBoundedAndRedacted(t *testing.T) {
	p := NewPools()
	defer p.Close()
	dsn := "postgres://relay:s3cretpw@127.0.0.1:1/app?sslmode=disable"
	db, err := p.Get("ns/x", dsn)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Read(context.Background(), db, pgident.Table{Schema: "public", Name: "outbox_event"})
	if err == nil {
		t.Fatal("expected an error")
	}
	if time.Since(start) > 4*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
	if strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("error leaks the password: %v", err)
	}
}
