package store_test

import (
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
	"github.com/outbox-operator/outbox-operator/internal/testenv/logtest"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// A worker's row is written by Beat; on a table migrated before the worker-status
// table existed the reporter says so once, asks no more, and counts no failure.
func TestStatusReporterWritesTheRowAndSaysOnceWhenTheTableIsMissing(t *testing.T) {
	_, db := relaytest.NewDB(t)
	var lines logtest.Lines
	failed := 0
	r := &store.StatusReporter{WorkerID: "w1", Report: store.Workers{DB: db, Table: relaytest.DefaultTable}.Report,
		Log: lines.Logger(), Failed: func() { failed++ }}
	r.Beat(ctx, false, "NOT_ENOUGH_REPLICAS")
	var up bool
	var code string
	if err := db.QueryRow(`SELECT broker_up, broker_error_code FROM public.outbox_event_workers WHERE worker_id = 'w1'`).Scan(&up, &code); err != nil {
		t.Fatal(err)
	}
	if up || code != "NOT_ENOUGH_REPLICAS" || r.Missing() || failed != 0 {
		t.Fatalf("row up=%v code=%q; missing %v, failed %d", up, code, r.Missing(), failed)
	}
	if _, err := db.Exec(`DROP TABLE public.outbox_event_workers`); err != nil {
		t.Fatal(err)
	}
	r.Beat(ctx, true, "")
	r.Beat(ctx, true, "")
	if !r.Missing() || failed != 0 || lines.Count("worker-status table missing") != 1 {
		t.Fatalf("missing %v, failed %d, log lines %d", r.Missing(), failed, lines.Count("worker-status table missing"))
	}
}
