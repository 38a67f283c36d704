package outbox_test

import (
	"context"
	"sync"
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
	"github.com/outbox-operator/outbox-operator/outbox"
)

// Migrate makes a table Publish can write to, and running it again, or from several
// goroutines at once for tables of one schema, succeeds.
func TestMigrateMakesATablePublishWritesTo(t *testing.T) {
	_, db := relaytest.NewDB(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := outbox.New("shop", []string{"orders_outbox", "orders_outbox", "refunds_outbox", "refunds_outbox"}[i])
			if err == nil {
				err = p.Migrate(ctx, db, outbox.MigrateOptions{NotifyTrigger: i%2 == 0})
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("migrate %d: %v", i, err)
		}
	}
	p, err := outbox.New("shop", "orders_outbox")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx, tx, good("migrated")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var status string
	if err := db.QueryRow(`SELECT status FROM shop.orders_outbox WHERE event_id = 'migrated'`).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != "PENDING" {
		t.Fatalf("status %q, want PENDING", status)
	}
	var triggers int
	if err := db.QueryRow(`SELECT count(*) FROM pg_trigger WHERE tgrelid = 'shop.orders_outbox'::regclass AND NOT tgisinternal`).Scan(&triggers); err != nil {
		t.Fatal(err)
	}
	if triggers == 0 {
		t.Fatal("NotifyTrigger: no trigger on shop.orders_outbox")
	}
}
