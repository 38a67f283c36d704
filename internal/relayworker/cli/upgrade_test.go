package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// `migrate --contract v2` upgrades a v1 table; after it, `migrate` without --contract
// keeps the table v2 with its shard count and finishes an upgrade that was
// interrupted, and `migrate --contract v1` (a v1 pipeline's init container) refuses
// the v2 table with one line, changing nothing.
func TestMigrateAfterAnUpgrade(t *testing.T) {
	dsn := srv.NewDatabase(t)
	run := func(args ...string) string {
		t.Helper()
		var stdout, log bytes.Buffer
		if err := Run(context.Background(), append([]string{"migrate", "--dsn", dsn}, args...), noEnv, &stdout, &log); err != nil {
			t.Fatalf("migrate %v: %v (log: %s)", args, err, log.String())
		}
		return log.String()
	}
	run("--contract", "v1")
	db, err := openDB(context.Background(), dsn, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO public.outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload)
VALUES ('e1', 'order', 'o1', 1, 'order.changed', 'orders', 'o1', '{}')`); err != nil {
		t.Fatal(err)
	}
	if log := run("--contract", "v2", "--shards", "16"); !strings.Contains(log, `"copiedToHold":1`) {
		t.Fatalf("the upgrade's log does not say what it copied: %s", log)
	}
	// As a migrate killed during its copy leaves it.
	if _, err := db.Exec(`UPDATE public.outbox_event_upgrade SET state = 'copying', last_event_id = ''`); err != nil {
		t.Fatal(err)
	}
	var stdout, log bytes.Buffer
	err = Run(context.Background(), []string{"migrate", "--dsn", dsn, "--contract", "v1"}, noEnv, &stdout, &log)
	if err == nil || !strings.Contains(err.Error(), "follows contract v2 and --contract v1 would turn it back into v1") {
		t.Fatalf("migrate --contract v1 on a v2 table: %v, want the refusal (log: %s)", err, log.String())
	}
	tb := pgident.Table{Schema: "public", Name: "outbox_event"}
	if u, err := schema.UpgradeState(context.Background(), db, tb); err != nil || u.State != schema.UpgradeCopying {
		t.Fatalf("the refused migrate changed the upgrade: %+v, %v", u, err)
	}
	run()
	c, err := schema.VerifyV2(context.Background(), db, tb, 16)
	if err != nil || c.Shards != 16 {
		t.Fatalf("after migrate without --contract: %+v, %v; want v2 with 16 shards", c, err)
	}
	u, err := schema.UpgradeState(context.Background(), db, tb)
	if err != nil || u.State != schema.UpgradeDone || u.Copied != 1 {
		t.Fatalf("upgrade after the resumed migrate: %+v, %v; want done, 1 copied", u, err)
	}
}
