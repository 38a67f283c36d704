package outboxstats

import (
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// A v1 table upgraded to contract v2 while its contract is cached: the next read
// detects v2 and counts the v1 rows with work from the hold table (the lowest version
// of an aggregate RETRY: retrying; the ones behind it HELD: pending, as v2 counts
// them; DEAD: dead), and the producers' new rows as pending.
func TestReadAfterAnUpgradeFromV1(t *testing.T) {
	_, db := srv.OpenDatabase(t)
	tb, _ := pgident.NewTable("public", "ob")
	if err := schema.Migrate(bg, db, tb, schema.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO ob (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload, status)
VALUES ('p1', 'order', 'o1', 1, 'order.changed', 'orders', 'o1', '{}', 'PENDING'),
       ('p2', 'order', 'o1', 2, 'order.changed', 'orders', 'o1', '{}', 'PENDING'),
       ('d1', 'order', 'o2', 1, 'order.changed', 'orders', 'o2', '{}', 'DEAD'),
       ('s1', 'order', 'o3', 1, 'order.changed', 'orders', 'o3', '{}', 'SENT')`); err != nil {
		t.Fatal(err)
	}
	s, err := Read(bg, db, tb)
	if err != nil || s.Pending != 2 || s.Dead != 1 {
		t.Fatalf("v1 read: %+v %v", s, err)
	}
	if err := schema.MigrateV2(bg, db, tb, schema.V2Options{Shards: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO ob (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload)
VALUES ('n1', 'order', 'o4', 1, 'order.changed', 'orders', 'o4', '{}')`); err != nil {
		t.Fatal(err)
	}
	s, err = Read(bg, db, tb)
	if err != nil {
		t.Fatal(err)
	}
	if s.Pending != 2 || s.Retrying != 1 || s.Dead != 1 {
		t.Fatalf("after the upgrade: %+v; want 2 pending (n1, p2 HELD), 1 retrying (p1), 1 dead", s)
	}
	if c, _ := contracts.get(db, tb); c.Version != schema.ContractV2 {
		t.Fatalf("cached %+v after the upgrade", c)
	}
}
