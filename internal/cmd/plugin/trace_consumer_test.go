package plugin

import (
	"context"
	"database/sql"
	"testing"

	"github.com/outbox-operator/outbox-operator/inbox"
)

// consumerDB is a consumer's database with the inbox tables, where group billing has
// processed ev-c (through inbox.Store.Handle, as a real consumer does) and group
// notifications has parked it.
func consumerDB(t *testing.T) (string, *sql.DB) {
	t.Helper()
	dsn, db := pgSrv.OpenDatabase(t)
	ctx := context.Background()
	if err := inbox.Migrate(ctx, db, "public"); err != nil {
		t.Fatal(err)
	}
	handle := func(group, id string) {
		s, err := inbox.New(db, "public", group)
		if err != nil {
			t.Fatal(err)
		}
		m := inbox.Message{EventID: id, EventType: "OrderPlaced", EventVersion: 1, AggregateType: "order",
			AggregateID: "o-1", AggregateVersion: 1, Payload: []byte(`{}`)}
		if _, err := s.Handle(ctx, m, func(context.Context, *sql.Tx, inbox.Message) (string, error) { return "ok", nil }); err != nil {
			t.Fatal(err)
		}
	}
	handle("billing", "ev-c")
	handle("audit", "ev-unrelated")
	if _, err := db.Exec(`INSERT INTO message_consume_parked (consumer_group, topic, kafka_partition, kafka_offset, event_id,
		error_code, error_message, attempts, last_seen_at) VALUES ('notifications', 'orders', 2, 41, 'ev-c',
		'retries_exhausted', 'smtp down', 5, '2026-05-01T12:00:00Z')`); err != nil {
		t.Fatal(err)
	}
	return dsn, db
}

func TestTraceWithConsumerDatabase(t *testing.T) {
	ns, o := pipelineWithDB(t)
	o.insert(t, "ev-c", "o-1", 1, `status = 'SENT', sent_at = now(), broker_partition = 2, broker_offset = 41`)
	cdsn, _ := consumerDB(t)
	createSecret(t, ns, "billing-db", map[string]string{"dsn": cdsn})
	bare, _ := pgSrv.OpenDatabase(t) // a database nobody ran inbox.Migrate in
	createSecret(t, ns, "bare-db", map[string]string{"url": bare})

	r := plugin(t, "trace", "ev-c", "-n", ns, "--consumer-db", "billing-db/dsn", "--consumer-db", "bare-db/url").mustSucceed(t)
	noSecrets(t, r, cdsn)
	out := r.stdout
	field(t, out, "status", "SENT")
	hasRow(t, out, `CONSUMERS (database from Secret "billing-db" key "dsn", schema public)`)
	hasRow(t, out, "GROUP STATUS FIRST RECEIVED UPDATED")
	assertRowPrefix(t, out, "billing SUCCESS ")
	hasRow(t, out, "PARKED")
	hasRow(t, out, "GROUP ERROR CODE ATTEMPTS STATUS TOPIC/PARTITION/OFFSET LAST SEEN")
	hasRow(t, out, "notifications retries_exhausted 5 PARKED orders/2/41 2026-05-01T12:00:00Z")
	hasRow(t, out, `CONSUMERS (database from Secret "bare-db" key "url", schema public)`)
	hasRow(t, out, "missing tables: public.message_consume, public.message_consume_parked (run inbox.Migrate in that database)")

	// An event the pipeline no longer has still shows what the consumers know, and fails.
	r = plugin(t, "trace", "ev-unrelated", "-n", ns, "--consumer-db", "billing-db/dsn")
	r.mustFailWith(t, 1, `event "ev-unrelated" not found in the tables of pipelines orders`)
	assertRowPrefix(t, r.stdout, "audit SUCCESS ")
}

func assertRowPrefix(t *testing.T, out, prefix string) {
	t.Helper()
	for _, r := range rows(out) {
		if len(r) >= len(prefix) && r[:len(prefix)] == prefix {
			return
		}
	}
	t.Errorf("no output line starts with %q:\n%s", prefix, out)
}
