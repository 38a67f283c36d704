package outboxstats

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

func TestReadWorkers(t *testing.T) {
	ctx := context.Background()
	_, db := srv.OpenDatabase(t)
	tbl, _ := pgident.NewTable("app", "outbox_event")
	if err := schema.Migrate(ctx, db, tbl, schema.Options{}); err != nil {
		t.Fatal(err)
	}
	workers := tbl.WithSuffix(schema.WorkersSuffix).Qualified()

	// A table migrated by an older version has no workers table: no reports, no error.
	if _, err := db.Exec(`DROP TABLE ` + workers); err != nil {
		t.Fatal(err)
	}
	insert(t, db, tbl, "p1", "PENDING", `) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9`)
	s, err := Read(ctx, db, tbl)
	if err != nil || s.Pending != 1 || s.Workers != (Workers{}) {
		t.Fatalf("missing workers table: %+v %v", s, err)
	}

	if err := schema.Migrate(ctx, db, tbl, schema.Options{}); err != nil {
		t.Fatal(err)
	}
	if s, err := Read(ctx, db, tbl); err != nil || s.Workers != (Workers{}) {
		t.Fatalf("empty workers table: %+v %v", s.Workers, err)
	}
	if _, err := db.Exec(`INSERT INTO ` + workers + ` (worker_id, broker_up, broker_down_since, broker_error_code, heartbeat_at) VALUES
		('a', false, now() - interval '3 minutes', 'BROKER_UNAVAILABLE', now()),
		('b', false, now() - interval '1 minute', 'BROKER_UNAVAILABLE', now() - interval '20 seconds'),
		('c', false, now() - interval '30 seconds', 'TLS_HANDSHAKE_FAILED', now()),
		('d', true, NULL, NULL, now()),
		('dead', false, now() - interval '1 hour', 'AUTHENTICATION_FAILED', now() - interval '2 minutes'),
		('dead2', false, now() - interval '1 hour', 'AUTHENTICATION_FAILED', now() - interval '61 seconds')`); err != nil {
		t.Fatal(err)
	}
	s, err = Read(ctx, db, tbl)
	if err != nil {
		t.Fatal(err)
	}
	w := s.Workers
	if w.Reporting != 4 || w.BrokerDown != 3 || w.BrokerErrorCode != "BROKER_UNAVAILABLE" {
		t.Fatalf("stale rows must be ignored: %+v", w)
	}
	if age := time.Since(w.BrokerDownSince); age < 2*time.Minute || age > 4*time.Minute {
		t.Fatalf("earliest fresh broker_down_since is %v old, want ~3m (the stale 1h one ignored)", age)
	}

	// Everyone recovered: reporting, nobody down.
	if _, err := db.Exec(`UPDATE ` + workers + ` SET broker_up = true, broker_down_since = NULL, broker_error_code = NULL`); err != nil {
		t.Fatal(err)
	}
	if s, err := Read(ctx, db, tbl); err != nil || s.Workers != (Workers{Reporting: 4}) {
		t.Fatalf("recovered: %+v %v", s.Workers, err)
	}
}
