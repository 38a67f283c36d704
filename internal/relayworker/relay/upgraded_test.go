package relay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/relay"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// A v1 worker whose table is upgraded to contract v2 under it stops with
// UpgradedError at its next claim, and its worker row goes (the v2 workers' fair
// share no longer counts it).
func TestUpgradedTableStopsTheWorker(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	w := newWorker(t, dsn, db, "w-upgraded", opts{poll: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { w.done <- w.r.Run(ctx) }()
	workers := relaytest.DefaultTable.WithSuffix(schema.WorkersSuffix).Qualified()
	relaytest.Eventually(t, 10*time.Second, "the worker's row", func() bool {
		var n int
		return db.QueryRow(`SELECT count(*) FROM `+workers+` WHERE worker_id = 'w-upgraded'`).Scan(&n) == nil && n == 1
	})

	if err := schema.MigrateV2(context.Background(), db, relaytest.DefaultTable, schema.V2Options{Shards: 16}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-w.done:
		var up *relay.UpgradedError
		if !errors.As(err, &up) {
			t.Fatalf("Run = %v, want an UpgradedError", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not stop within 20s of the upgrade")
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM ` + workers + ` WHERE worker_id = 'w-upgraded'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("worker rows after it stopped: %d, %v; want 0", n, err)
	}
}
