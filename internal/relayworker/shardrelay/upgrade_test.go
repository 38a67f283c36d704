package shardrelay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// A worker started while the table's upgrade from v1 is still copying publishes
// nothing (not ready, saying why) until the copy is done; then the v1 rows with work
// go out from the hold table before the newer v2 versions of their aggregates.
func TestUpgradeInProgressHoldsTheWorkerBack(t *testing.T) {
	dsn, db := srv.OpenDatabase(t)
	tp := topic(t)
	if err := schema.Migrate(ctx, db, tb, schema.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		agg     string
		version int
		status  string
	}{{"u1", 1, schema.StatusSent}, {"u1", 2, schema.StatusPending}, {"u1", 3, schema.StatusRetry}, {"u2", 1, schema.StatusDead}} {
		if _, err := db.Exec(`INSERT INTO outbox_v2 (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
    destination, message_key, payload, status) VALUES ($1, 'order', $2, $3, 'order.changed', $4, $2, '{}', $5)`,
			ev{agg: r.agg, version: r.version}.id(), r.agg, r.version, tp, r.status); err != nil {
			t.Fatal(err)
		}
	}
	if err := schema.MigrateV2(ctx, db, tb, schema.V2Options{Shards: shards}); err != nil {
		t.Fatal(err)
	}
	// As a migrate stopped before its copy ended leaves it.
	if _, err := db.Exec(`UPDATE outbox_v2_upgrade SET state = 'copying'`); err != nil {
		t.Fatal(err)
	}
	insert(t, db, ev{agg: "u1", version: 4, topic: tp}, ev{agg: "u3", version: 1, topic: tp})

	w := start(t, dsn, "w1", opts{})
	deadline := time.Now().Add(10 * time.Second)
	for {
		ready, reason := w.h.Ready()
		if !ready && strings.Contains(reason, "upgrade from table contract v1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker readiness %v %q, want not ready waiting for the upgrade", ready, reason)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second) // ten poll intervals
	if n := broker.Count(tp); n != 0 {
		t.Fatalf("%d records published while the upgrade copies, want 0", n)
	}

	if err := schema.MigrateV2(ctx, db, tb, schema.V2Options{Shards: shards}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for broker.Count(tp) < 4 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	d := check(t, map[string][]string{"u1": {"u1-v2", "u1-v3", "u1-v4"}, "u3": {"u3-v1"}}, tp)
	if d.lost != 0 || d.reorders != 0 {
		t.Fatalf("after the upgrade: %+v", d)
	}
	if ready, reason := w.h.Ready(); !ready {
		t.Fatalf("worker not ready after the upgrade: %q", reason)
	}
	var dead string
	if err := db.QueryRow(`SELECT state FROM outbox_v2_hold WHERE event_id = 'u2-v1'`).Scan(&dead); err != nil || dead != schema.StatusDead {
		t.Fatalf("v1 DEAD row in hold: %q, %v", dead, err)
	}
}

// A v1 table whose payload is not jsonb upgrades with its types: the v2 table, its
// hold table and its archive keep bytea (or text), so payloads that are not JSON and
// the producers' INSERTs of them go on working; the pending v1 event (from hold) and a
// new v2 one arrive byte for byte. There is no cast from bytea to json: with json
// columns the upgrade failed at its first statement.
func TestUpgradeKeepsThePayloadType(t *testing.T) {
	for _, c := range []struct{ typ, using, v1, v2, want1, want2 string }{
		{"bytea", `convert_to(payload::text, 'UTF8')`, `'\x00ff7b0a'::bytea`, `'\x01fe'::bytea`, "\x00\xff{\n", "\x01\xfe"},
		{"text", `payload::text`, `'not json {'`, `' {"a" : 1} '`, "not json {", ` {"a" : 1} `},
	} {
		t.Run(c.typ, func(t *testing.T) {
			dsn, db := srv.OpenDatabase(t)
			tp := topic(t)
			if err := schema.Migrate(ctx, db, tb, schema.Options{}); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`ALTER TABLE outbox_v2 ALTER payload TYPE ` + c.typ + ` USING ` + c.using + `, ALTER headers TYPE text`); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`INSERT INTO outbox_v2 (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
    destination, message_key, payload) VALUES ('k-v1', 'order', 'k', 1, 'order.changed', $1, 'k', `+c.v1+`)`, tp); err != nil {
				t.Fatal(err)
			}
			if err := schema.MigrateV2(ctx, db, tb, schema.V2Options{Shards: shards}); err != nil {
				t.Fatalf("upgrade of a v1 table with a %s payload: %v", c.typ, err)
			}
			var types string
			if err := db.QueryRow(`SELECT string_agg(c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, NULL), ', ' ORDER BY c.relname, a.attname)
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
WHERE c.relname IN ('outbox_v2', 'outbox_v2_hold', 'outbox_v2_archive') AND a.attname IN ('payload', 'headers')`).Scan(&types); err != nil {
				t.Fatal(err)
			}
			want := strings.NewReplacer("T", c.typ).Replace("outbox_v2.headers text, outbox_v2.payload T, outbox_v2_archive.headers text, " +
				"outbox_v2_archive.payload T, outbox_v2_hold.headers text, outbox_v2_hold.payload T")
			if types != want {
				t.Fatalf("after the upgrade: %s\nwant %s", types, want)
			}
			if _, err := db.Exec(`INSERT INTO outbox_v2 (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
    destination, message_key, payload) VALUES ('k-v2', 'order', 'k', 2, 'order.changed', $1, 'k', `+c.v2+`)`, tp); err != nil {
				t.Fatalf("a producer's INSERT after the upgrade: %v", err)
			}
			start(t, dsn, "w1", opts{})
			recs, err := broker.ReadAllWithin(30*time.Second, tp, 2)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []string{c.want1, c.want2} {
				if string(recs[i].Value) != want {
					t.Errorf("record %d: value %q, want %q", i, recs[i].Value, want)
				}
			}
		})
	}
}
