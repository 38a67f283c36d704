package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// migrateRun runs `relayworker migrate --dsn dsn --table table args...` and returns
// its log and error.
func migrateRun(dsn, table string, args ...string) (string, error) {
	var stdout, log bytes.Buffer
	err := Run(context.Background(), append([]string{"migrate", "--dsn", dsn, "--table", table}, args...), noEnv, &stdout, &log)
	return log.String(), err
}

// Without --contract a missing table is created as v2 (schema.DefaultShards, or --shards), a
// v1 table stays v1 and the log says how to upgrade it, and a v2 table keeps its
// contract and shard count. --contract v1 creates or keeps v1 and refuses a v2 table.
func TestMigrateContractDefaults(t *testing.T) {
	dsn := srv.NewDatabase(t)
	db, err := openDB(context.Background(), dsn, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	contractOf := func(table string) schema.Contract {
		t.Helper()
		c, err := schema.DetectContract(context.Background(), db, pgident.Table{Schema: "public", Name: table})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	must := func(table string, args ...string) string {
		t.Helper()
		log, err := migrateRun(dsn, table, args...)
		if err != nil {
			t.Fatalf("migrate --table %s %v: %v (log: %s)", table, args, err, log)
		}
		return log
	}

	must("fresh")
	if c := contractOf("fresh"); c.Version != schema.ContractV2 || c.Shards != schema.DefaultShards {
		t.Errorf("migrate without --contract created %+v, want v2 with %d shards", c, schema.DefaultShards)
	}
	must("fresh16", "--shards", "16")
	if c := contractOf("fresh16"); c.Version != schema.ContractV2 || c.Shards != 16 {
		t.Errorf("migrate --shards 16 created %+v, want v2 with 16 shards", c)
	}
	if log := must("fresh16"); strings.Contains(log, "contract v1") {
		t.Errorf("migrate of a v2 table talks of v1: %s", log)
	}
	if c := contractOf("fresh16"); c.Version != schema.ContractV2 || c.Shards != 16 {
		t.Errorf("migrate without --shards on a 16-shard table left %+v, want v2 with 16 shards", c)
	}

	must("old", "--contract", "v1")
	if c := contractOf("old"); c.Version != schema.ContractV1 {
		t.Errorf("migrate --contract v1 created %+v, want v1", c)
	}
	log := must("old")
	if c := contractOf("old"); c.Version != schema.ContractV1 {
		t.Errorf("migrate without --contract turned a v1 table into %+v, want it v1", c)
	}
	if !strings.Contains(log, "outbox table follows contract v1") || !strings.Contains(log, "--contract v2") {
		t.Errorf("migrate of a v1 table does not say how to upgrade it: %s", log)
	}
	if _, err := migrateRun(dsn, "old", "--shards", "16"); err == nil || !strings.Contains(err.Error(), "add --contract v2") {
		t.Errorf("migrate --shards on a v1 table: %v, want a refusal naming --contract v2", err)
	}
	must("old", "--contract", "v1")
	if c := contractOf("old"); c.Version != schema.ContractV1 {
		t.Errorf("migrate --contract v1 turned a v1 table into %+v", c)
	}

	log, err = migrateRun(dsn, "fresh", "--contract", "v1")
	if err == nil || !strings.Contains(err.Error(), "follows contract v2 and --contract v1 would turn it back into v1") {
		t.Errorf("migrate --contract v1 on a v2 table: %v (log: %s), want the refusal", err, log)
	}
	if c := contractOf("fresh"); c.Version != schema.ContractV2 || c.Shards != schema.DefaultShards {
		t.Errorf("the refused migrate left %+v, want v2 with %d shards", c, schema.DefaultShards)
	}
}
