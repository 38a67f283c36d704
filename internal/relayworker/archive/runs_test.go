package archive

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// lastRun is the newest recorded run of policy.
type lastRun struct {
	mode                 string
	sent, dead, consumer int64
	errText              sql.NullString
	took                 time.Duration
}

func newestRun(t *testing.T, db *sql.DB, policy string) lastRun {
	t.Helper()
	var r lastRun
	var secs float64
	err := db.QueryRow(`SELECT mode, sent_moved, dead_moved, consumer_log_trimmed, error,
		extract(epoch FROM finished_at - started_at) FROM outbox_event_archive_runs
		WHERE policy = $1 ORDER BY started_at DESC, run_id DESC LIMIT 1`, policy).
		Scan(&r.mode, &r.sent, &r.dead, &r.consumer, &r.errText, &secs)
	if err != nil {
		t.Fatalf("newest run of %q: %v", policy, err)
	}
	r.took = time.Duration(secs * float64(time.Second))
	return r
}

func TestRunIsRecordedWithCounts(t *testing.T) {
	db, cfg := setup(t, "archive")
	cfg.Policy = "shop/orders"
	for i := 0; i < 4; i++ {
		row(t, db, fmt.Sprintf("sent-%d", i), schema.StatusSent, 48*time.Hour)
	}
	row(t, db, "dead", schema.StatusDead, 48*time.Hour)
	if _, err := Run(context.Background(), db, cfg, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	r := newestRun(t, db, "shop/orders")
	if r.mode != "archive" || r.sent != 4 || r.dead != 1 || r.consumer != 0 || r.errText.Valid || r.took < 0 {
		t.Fatalf("recorded %+v", r)
	}
}

// A run that fails part-way records what it already committed and why it stopped.
func TestFailedRunIsRecordedWithCountsSoFar(t *testing.T) {
	db, cfg := setup(t, "archive")
	cfg.Policy = "shop/orders"
	for i := 0; i < 7; i++ { // several batches of 3
		row(t, db, fmt.Sprintf("sent-%d", i), schema.StatusSent, 48*time.Hour)
	}
	row(t, db, "dead", schema.StatusDead, 48*time.Hour)
	// SENT rows archive fine; the first DEAD batch fails inside PostgreSQL.
	if _, err := db.Exec(`CREATE FUNCTION refuse_dead() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'DEAD' THEN RAISE EXCEPTION 'archive disk full (test)'; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_dead BEFORE INSERT ON outbox_event_archive FOR EACH ROW EXECUTE FUNCTION refuse_dead()`); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), db, cfg, logr.Discard())
	if err == nil || res.SentMoved != 7 {
		t.Fatalf("run: %+v %v, want 7 SENT moved and an error", res, err)
	}
	r := newestRun(t, db, "shop/orders")
	if r.sent != 7 || r.dead != 0 || !r.errText.Valid ||
		!strings.Contains(r.errText.String, "archive DEAD rows") || !strings.Contains(r.errText.String, "archive disk full (test)") {
		t.Fatalf("recorded %+v", r)
	}
	if strings.Contains(r.errText.String, cfg.DSN) {
		t.Fatalf("error text contains the DSN: %q", r.errText.String)
	}
}

// SIGTERM cancels the run's context; the run is still recorded.
func TestCancelledRunIsRecorded(t *testing.T) {
	db, cfg := setup(t, "delete")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, db, cfg, logr.Discard()); err == nil {
		t.Fatal("cancelled run reported success")
	}
	if r := newestRun(t, db, ""); r.mode != "delete" || !strings.Contains(r.errText.String, "context canceled") {
		t.Fatalf("recorded %+v", r)
	}
}

func TestRunHistoryIsBoundedPerPolicy(t *testing.T) {
	db, cfg := setup(t, "archive")
	cfg.Policy = "shop/orders"
	// 150 older runs of this policy and 3 of another one.
	if _, err := db.Exec(`INSERT INTO outbox_event_archive_runs (policy, mode, started_at, finished_at)
		SELECT 'shop/orders', 'archive', now() - make_interval(hours => g), now() - make_interval(hours => g)
		FROM generate_series(1, 150) g;
		INSERT INTO outbox_event_archive_runs (policy, mode, started_at)
		SELECT 'other/policy', 'delete', now() - interval '1 year' FROM generate_series(1, 3)`); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), db, cfg, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	var kept, other int
	var oldestHours float64
	if err := db.QueryRow(`SELECT count(*) FILTER (WHERE policy = 'shop/orders'), count(*) FILTER (WHERE policy = 'other/policy'),
		extract(epoch FROM now() - min(started_at) FILTER (WHERE policy = 'shop/orders')) / 3600
		FROM outbox_event_archive_runs`).Scan(&kept, &other, &oldestHours); err != nil {
		t.Fatal(err)
	}
	if kept != schema.ArchiveRunsKept || other != 3 || oldestHours > 99.5 {
		t.Fatalf("kept %d runs of the policy (oldest %.1fh ago), %d of the other; want %d, 99h, 3",
			kept, oldestHours, other, schema.ArchiveRunsKept)
	}
}

// Tables migrated before the run history existed still archive; the run is not recorded.
func TestMissingRunsTableDoesNotFailTheRun(t *testing.T) {
	db, cfg := setup(t, "archive")
	if _, err := db.Exec(`DROP TABLE outbox_event_archive_runs`); err != nil {
		t.Fatal(err)
	}
	row(t, db, "sent", schema.StatusSent, 48*time.Hour)
	if res, err := Run(context.Background(), db, cfg, logr.Discard()); err != nil || res.SentMoved != 1 {
		t.Fatalf("run: %+v %v", res, err)
	}
}
