package archive

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

func TestMain(m *testing.M) { relaytest.Main(m) }

func setup(t *testing.T, mode string) (*sql.DB, Options) {
	t.Helper()
	dsn, db := relaytest.NewDB(t)
	return db, Options{Table: relaytest.DefaultTable, DSN: dsn, Mode: mode, BatchSize: 3,
		SentRetention: time.Hour, DeadRetention: 24 * time.Hour, ConsumerLogRetention: time.Hour}
}

// row inserts an event in the given status; age says how long ago it was sent/updated.
func row(t *testing.T, db *sql.DB, id, status string, age time.Duration) {
	t.Helper()
	_, err := db.Exec(`INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
		destination, message_key, payload, status, sent_at, updated_at, created_at, lease_until)
		VALUES ($1, 'Order', $1, 1, 'T', 'orders', $1, '{}', $2,
		        CASE WHEN $2 = 'SENT' THEN now() - make_interval(secs => $3) END,
		        now() - make_interval(secs => $3), now() - make_interval(secs => $3),
		        CASE WHEN $2 = 'SENDING' THEN now() - interval '1 hour' END)`, id, status, age.Seconds())
	if err != nil {
		t.Fatal(err)
	}
}

func statuses(t *testing.T, db *sql.DB, table string) map[string]bool {
	t.Helper()
	rows, err := db.Query(`SELECT event_id FROM ` + table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		out[id] = true
	}
	return out
}

func TestArchiveMovesOnlyOldTerminalRows(t *testing.T) {
	db, cfg := setup(t, "archive")
	old := 48 * time.Hour
	for i := 0; i < 7; i++ { // more than one batch of 3
		row(t, db, fmt.Sprintf("sent-old-%d", i), schema.StatusSent, old)
	}
	row(t, db, "sent-new", schema.StatusSent, 10*time.Minute)
	row(t, db, "dead-old", schema.StatusDead, old)
	row(t, db, "dead-new", schema.StatusDead, time.Hour)
	// In-flight rows are never touched, however old they are.
	row(t, db, "pending-old", schema.StatusPending, 1000*time.Hour)
	row(t, db, "retry-old", schema.StatusRetry, 1000*time.Hour)
	row(t, db, "sending-expired", schema.StatusSending, 1000*time.Hour)

	res, err := Run(context.Background(), db, cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if res.SentMoved != 7 || res.DeadMoved != 1 {
		t.Fatalf("result %+v, want 7 sent and 1 dead moved", res)
	}
	left := statuses(t, db, "outbox_event")
	for _, id := range []string{"sent-new", "dead-new", "pending-old", "retry-old", "sending-expired"} {
		if !left[id] {
			t.Errorf("%s was removed", id)
		}
	}
	if len(left) != 5 {
		t.Errorf("left %v", left)
	}
	archived := statuses(t, db, "outbox_event_archive")
	if len(archived) != 8 || !archived["dead-old"] || !archived["sent-old-6"] {
		t.Fatalf("archived %v", archived)
	}
	// The archive keeps the whole row, not just the id.
	var dest string
	if err := db.QueryRow(`SELECT destination FROM outbox_event_archive WHERE event_id = 'sent-old-0' AND archived_at IS NOT NULL`).Scan(&dest); err != nil || dest != "orders" {
		t.Fatalf("archived row: %q %v", dest, err)
	}
	// Running again finds nothing more: idempotent.
	if res, err := Run(context.Background(), db, cfg, logr.Discard()); err != nil || res.SentMoved+res.DeadMoved != 0 {
		t.Fatalf("second run %+v %v", res, err)
	}
}

func TestDeleteModeAndConsumerLog(t *testing.T) {
	db, cfg := setup(t, "delete")
	row(t, db, "sent-old", schema.StatusSent, 48*time.Hour)
	if _, err := db.Exec(`INSERT INTO message_consume (consumer_group, event_id, event_type, request_hash, status, updated_at) VALUES
		('g', 'old-ok', 'T', 'h', 'SUCCESS', now() - interval '2 hours'),
		('g', 'old-processing', 'T', 'h', 'PROCESSING', now() - interval '2 hours'),
		('g', 'new-ok', 'T', 'h', 'SUCCESS', now())`); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), db, cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if res.SentMoved != 1 || res.ConsumerLogTrims != 1 {
		t.Fatalf("result %+v", res)
	}
	if n := len(statuses(t, db, "outbox_event_archive")); n != 0 {
		t.Fatalf("delete mode archived %d rows", n)
	}
	left := statuses(t, db, "message_consume")
	if left["old-ok"] || !left["old-processing"] || !left["new-ok"] {
		t.Fatalf("consumer log left %v", left)
	}
}

func TestMissingTableIsOneClearError(t *testing.T) {
	dsn, db := relaytest.PG.OpenDatabase(t)
	o := Options{Table: relaytest.DefaultTable, DSN: dsn, Mode: contract.DefaultArchiveMode, BatchSize: contract.DefaultArchiveBatchSize,
		SentRetention: contract.DefaultSentRetention, DeadRetention: contract.DefaultDeadRetention}
	_, err := Run(context.Background(), db, o, logr.Discard())
	if err == nil || err.Error() != "outbox table public.outbox_event does not exist (run `relayworker migrate`)" {
		t.Fatalf("err = %v", err)
	}
}
