package cli

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { pgtest.Main(m, &srv) }

// Many pipelines with `migrate: true` start together: their init containers run
// `relayworker migrate` for different tables of one schema at the same moment, and
// share the schema's consumer log (message_consume). Every one of them succeeds, and
// the schema ends up with all the tables: in a schema that exists (public) and in one
// the migrates create.
func TestConcurrentMigratesOfOneSchema(t *testing.T) {
	for _, schema := range []string{"public", "shop"} {
		t.Run(schema, func(t *testing.T) { concurrentMigrates(t, schema, 20) })
	}
}

func concurrentMigrates(t *testing.T, schema string, n int) {
	dsn := srv.NewDatabase(t)
	var wg sync.WaitGroup
	errs := make([]error, n)
	logs := make([]bytes.Buffer, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var stdout bytes.Buffer
			args := []string{"migrate", "--dsn", dsn, "--schema", schema, "--table", fmt.Sprintf("outbox_%02d", i)}
			errs[i] = Run(context.Background(), args, noEnv, &stdout, &logs[i])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrate outbox_%02d: %v (log: %s)", i, err, logs[i].String())
		}
	}
	db, err := openDB(context.Background(), dsn, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables int
	if err := db.QueryRow(`SELECT count(*) FROM information_schema.tables
		WHERE table_schema = $1 AND table_name ~ '^outbox_[0-9]+$'`, schema).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != n {
		t.Errorf("schema %s has %d outbox tables, want %d", schema, tables, n)
	}
}
