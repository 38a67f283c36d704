package replay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

func TestMain(m *testing.M) { relaytest.Main(m) }

func setup(t *testing.T) (*sql.DB, string) {
	t.Helper()
	dsn, db := relaytest.NewDB(t)
	return db, dsn
}

func dead(t *testing.T, db *sql.DB, n int, eventType, code string) {
	t.Helper()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s-%d", strings.ToLower(eventType), i)
		if _, err := db.Exec(`INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
			destination, message_key, payload, status, retry_count, last_error_code, last_error_message)
			VALUES ($1, 'Order', $1, 1, $2, 'orders', $1, '{}', 'DEAD', 12, $3, 'broker said no')`, id, eventType, code); err != nil {
			t.Fatal(err)
		}
	}
}

// standIn plays the relay's part in these unit tests: PENDING rows become SENT, or DEAD
// again for event type "Poison". The real relay runs in the end-to-end suite.
func standIn(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_, _ = db.ExecContext(ctx, `UPDATE outbox_event SET
				status = CASE WHEN event_type = 'Poison' THEN 'DEAD' ELSE 'SENT' END,
				last_error_code = CASE WHEN event_type = 'Poison' THEN 'INVALID_PAYLOAD' ELSE last_error_code END,
				sent_at = CASE WHEN event_type = 'Poison' THEN NULL ELSE now() END
				WHERE status = 'PENDING'`)
			time.Sleep(20 * time.Millisecond)
		}
	}()
}

// replayer runs a replay with the flags' defaults (docs/worker-contract.md, "replay
// flags"), a reason and a requester, and whatever set changes.
func replayer(t *testing.T, db *sql.DB, set func(*Options)) *Replayer {
	t.Helper()
	o := Options{Table: relaytest.DefaultTable, Reason: "INC-1: consumer fixed", RequestedBy: "sre",
		Rate: contract.DefaultReplayRate, CanarySize: contract.DefaultCanarySize,
		MaxNewDeadPercent: contract.DefaultMaxNewDeadPercent, MaxEvents: 100000,
		SettleTimeout: 30 * time.Minute, PollEvery: 20 * time.Millisecond}
	set(&o)
	return &Replayer{DB: db, Opts: o, Log: logr.Discard()}
}

type auditRow struct {
	phase                                string
	matched, replayed, succeeded, deadAg int
	dryRun, finished                     bool
	reason, by                           string
}

func audit(t *testing.T, db *sql.DB, id string) auditRow {
	t.Helper()
	var a auditRow
	if err := db.QueryRow(`SELECT phase, matched, replayed, succeeded, dead_again, dry_run, finished_at IS NOT NULL, reason, requested_by
		FROM outbox_event_replay_audit WHERE replay_id = $1`, id).Scan(&a.phase, &a.matched, &a.replayed, &a.succeeded, &a.deadAg, &a.dryRun, &a.finished, &a.reason, &a.by); err != nil {
		t.Fatal(err)
	}
	return a
}

func countStatus(t *testing.T, db *sql.DB, status, eventType string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM outbox_event WHERE status = $1 AND event_type = $2`, status, eventType).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestReplayCanaryThenRestKeepsEventIDs(t *testing.T) {
	db, _ := setup(t)
	dead(t, db, 25, "OrderPaid", "BROKER_UNAVAILABLE")
	dead(t, db, 3, "Other", "MESSAGE_TOO_LARGE") // not selected
	standIn(t, db)
	r := replayer(t, db, func(o *Options) {
		o.ReplayID, o.Selector.ErrorCode, o.CanarySize, o.Rate = "r1", "BROKER_UNAVAILABLE", 5, 1000
	})
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Phase != PhaseSucceeded || res.Matched != 25 || res.Replayed != 25 || res.Succeeded != 25 || res.DeadAgain != 0 {
		t.Fatalf("result %+v", res)
	}
	if got := countStatus(t, db, "SENT", "OrderPaid"); got != 25 {
		t.Fatalf("%d of 25 SENT", got)
	}
	// Same rows, same ids: nothing new was inserted.
	var total int
	_ = db.QueryRow(`SELECT count(*) FROM outbox_event`).Scan(&total)
	if total != 28 || countStatus(t, db, "DEAD", "Other") != 3 {
		t.Fatalf("total %d, unselected dead %d", total, countStatus(t, db, "DEAD", "Other"))
	}
	a := audit(t, db, "r1")
	if a.phase != PhaseSucceeded || a.matched != 25 || a.replayed != 25 || a.succeeded != 25 || !a.finished || a.reason != "INC-1: consumer fixed" || a.by != "sre" {
		t.Fatalf("audit %+v", a)
	}
	// Running the same replay id again is a no-op that reports the recorded result.
	again, err := r.Run(context.Background())
	if err != nil || again.Replayed != 25 || again.Phase != PhaseSucceeded {
		t.Fatalf("re-run %+v %v", again, err)
	}
}

func TestCanaryFailureStopsTheReplay(t *testing.T) {
	db, _ := setup(t)
	dead(t, db, 10, "Poison", "INVALID_PAYLOAD")
	standIn(t, db)
	r := replayer(t, db, func(o *Options) {
		o.ReplayID, o.Selector.EventType, o.CanarySize, o.MaxNewDeadPercent = "r2", "Poison", 4, 10
	})
	res, err := r.Run(context.Background())
	if !errors.Is(err, ErrCanaryFailed) {
		t.Fatalf("err = %v, want canary failure", err)
	}
	if res.Phase != PhaseFailed || res.Replayed != 4 || res.DeadAgain != 4 {
		t.Fatalf("result %+v", res)
	}
	// The six events after the canary were never handed back.
	var untouched int
	_ = db.QueryRow(`SELECT count(*) FROM outbox_event WHERE status = 'DEAD' AND last_error_message = 'broker said no'`).Scan(&untouched)
	if untouched != 6 {
		t.Fatalf("%d events untouched, want 6", untouched)
	}
	if a := audit(t, db, "r2"); a.phase != PhaseFailed || a.deadAg != 4 || !a.finished {
		t.Fatalf("audit %+v", a)
	}
	if _, err := r.Run(context.Background()); !errors.Is(err, ErrCanaryFailed) || !strings.Contains(err.Error(), "already failed") {
		t.Fatalf("re-run err = %v", err)
	}
}

func TestDryRunOnlyCountsAndAudits(t *testing.T) {
	db, _ := setup(t)
	dead(t, db, 7, "OrderPaid", "X")
	r := replayer(t, db, func(o *Options) { o.ReplayID, o.Selector.EventType, o.DryRun = "r3", "OrderPaid", true })
	res, err := r.Run(context.Background())
	if err != nil || res.Matched != 7 || res.Replayed != 0 {
		t.Fatalf("result %+v %v", res, err)
	}
	if countStatus(t, db, "DEAD", "OrderPaid") != 7 {
		t.Fatal("dry run changed rows")
	}
	if a := audit(t, db, "r3"); !a.dryRun || a.matched != 7 || a.phase != PhaseSucceeded {
		t.Fatalf("audit %+v", a)
	}
}

// A Job pod that dies mid-replay is retried; the retry resumes from the recorded
// progress instead of selecting again or handing rows back twice.
func TestInterruptedReplayResumes(t *testing.T) {
	db, _ := setup(t)
	dead(t, db, 12, "OrderPaid", "X")
	r := replayer(t, db, func(o *Options) {
		o.ReplayID, o.Selector.EventType, o.CanarySize, o.SettleTimeout = "r4", "OrderPaid", 3, 200*time.Millisecond
	})
	// No relay is running: the canary cannot settle and the run gives up.
	if _, err := r.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "still in flight") {
		t.Fatalf("err = %v", err)
	}
	if a := audit(t, db, "r4"); a.phase != PhaseRunning || a.replayed != 3 {
		t.Fatalf("audit after interruption %+v", a)
	}
	// New DEAD rows matching the selector after the start are not part of this replay.
	dead(t, db, 1, "OrderPaidLate", "X")
	_, _ = db.Exec(`UPDATE outbox_event SET event_type = 'OrderPaid' WHERE event_type = 'OrderPaidLate'`)
	standIn(t, db)
	r.Opts.SettleTimeout = time.Minute
	res, err := r.Run(context.Background())
	if err != nil || res.Phase != PhaseSucceeded || res.Matched != 12 || res.Succeeded != 12 {
		t.Fatalf("resumed: %+v %v", res, err)
	}
	if countStatus(t, db, "DEAD", "OrderPaid") != 1 {
		t.Fatal("the late DEAD event was replayed by a replay that started before it")
	}
}
