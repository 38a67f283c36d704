package inbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/outbox-operator/outbox-operator/inbox"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// Consumers of several groups start together, in the schema where pipelines' migrates
// create their outbox tables and the shared message_consume: every migrate succeeds
// ("IF NOT EXISTS" alone loses a race on PostgreSQL's catalog unique indexes).
func TestConcurrentMigratesWithRelayMigrates(t *testing.T) {
	_, db := srv.OpenDatabase(t)
	ctx := context.Background()
	const n = 10
	errs := make(chan error, 2*n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(2)
		go func() { defer wg.Done(); errs <- inbox.Migrate(ctx, db, "shop") }()
		go func() {
			defer wg.Done()
			tb, err := pgident.NewTable("shop", fmt.Sprintf("outbox_%02d", i))
			if err == nil {
				err = schema.Migrate(ctx, db, tb, schema.Options{})
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if _, err := inbox.New(db, "shop", "points"); err != nil {
		t.Fatal(err)
	}
	var tables int
	if err := db.QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_schema = 'shop'
		AND table_name IN ('message_consume', 'message_consume_version', 'message_consume_parked', 'message_consume_replay')`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 4 {
		t.Errorf("schema shop has %d of the 4 consumer tables", tables)
	}
}
