package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// upgradedPipeline is a namespace with pipeline "orders" (contract v2) on table
// outbox_event, made v1 and upgraded by `relayworker migrate --contract v2`'s own
// code (schema.MigrateV2). Before the upgrade aggregate o-1 had ev-sent (version 1,
// SENT at partition 3, offset 1234), ev-sent-2 (version 2, SENT) and ev-dead
// (version 3, DEAD); ev-old (o-0, SENT) was in v1's archive; ev-pending (o-3) was
// PENDING.
func upgradedPipeline(t *testing.T) (string, outboxDB) {
	t.Helper()
	ns := newNamespace(t)
	o := newOutboxDB(t, "outbox_event")
	sent := `status = 'SENT', created_at = '2026-05-01T10:00:00Z', sent_at = '2026-05-01T10:00:02Z', updated_at = '2026-05-01T10:00:02Z', `
	o.insert(t, "ev-sent", "o-1", 1, sent+`broker_partition = 3, broker_offset = 1234`)
	o.insert(t, "ev-sent-2", "o-1", 2, sent+`broker_partition = 3, broker_offset = 1240`)
	o.insert(t, "ev-dead", "o-1", 3, `status = 'DEAD', retry_count = 5, last_error_code = 'MAX_ATTEMPTS',
		last_error_message = 'BROKER_UNAVAILABLE: connection refused'`)
	o.insert(t, "ev-pending", "o-3", 1, "")
	o.insert(t, "ev-old", "o-0", 1, sent+`broker_partition = 0, broker_offset = 7`)
	o.exec(t, `INSERT INTO `+o.table.WithSuffix(schema.ArchiveSuffix).Qualified()+` SELECT *, '2026-04-09T00:00:00Z' FROM `+
		o.table.Qualified()+` WHERE event_id = 'ev-old'`)
	o.exec(t, `DELETE FROM `+o.table.Qualified()+` WHERE event_id = 'ev-old'`)

	if err := schema.MigrateV2(context.Background(), o.db, o.table, schema.V2Options{Shards: 4}); err != nil {
		t.Fatal(err)
	}
	createSecret(t, ns, "db", map[string]string{"dsn": o.dsn})
	pipelineOf(t, ns, "orders", "db", "", outboxv1.ContractV2)
	return ns, o
}

// trace on a table upgraded to contract v2: an event published before the upgrade is
// shown from the v1 table moved aside (or v1's archive moved with it), saying so,
// with its partition and offset; a DEAD one is the hold table's, where the upgrade
// copied it and where a replay finds it; an event in neither still fails.
func TestTraceV1HistoryAfterUpgrade(t *testing.T) {
	ns, o := upgradedPipeline(t)

	r := plugin(t, "trace", "ev-sent", "-n", ns).mustSucceed(t)
	noSecrets(t, r, o.dsn)
	out := r.stdout
	hasRow(t, out, "EVENT ev-sent pipeline "+ns+"/orders table public.outbox_event_v1")
	field(t, out, "history", "public.outbox_event_v1 (moved aside by the upgrade to contract v2)")
	field(t, out, "status", "SENT")
	field(t, out, "aggregate", "order/o-1 version 1")
	field(t, out, "sent", "2026-05-01T10:00:02Z")
	field(t, out, "broker", "partition 3, offset 1234")
	// The replay audit table was not moved aside: it is the pipeline's.
	hasRow(t, out, "REPLAY AUDIT (public.outbox_event_replay_audit): no replay mentions this event")

	r = plugin(t, "trace", "ev-old", "-n", ns, "-p", "orders").mustSucceed(t)
	noSecrets(t, r, o.dsn)
	hasRow(t, r.stdout, "EVENT ev-old pipeline "+ns+"/orders table public.outbox_event_v1_archive (archived)")
	field(t, r.stdout, "history", "public.outbox_event_v1_archive (moved aside by the upgrade to contract v2)")
	field(t, r.stdout, "archived", "2026-04-09T00:00:00Z")
	field(t, r.stdout, "broker", "partition 0, offset 7")

	r = plugin(t, "trace", "ev-dead", "-n", ns).mustSucceed(t)
	noSecrets(t, r, o.dsn)
	hasRow(t, r.stdout, "EVENT ev-dead pipeline "+ns+"/orders table public.outbox_event (contract v2)")
	field(t, r.stdout, "status", "DEAD")
	field(t, r.stdout, "attempts", "5")
	field(t, r.stdout, "last error", "MAX_ATTEMPTS")

	r = plugin(t, "trace", "nope", "-n", ns, "-p", "orders")
	r.mustFailWith(t, 1, `event "nope" not found in table public.outbox_event of pipeline "orders" (also not archived)`)
	noSecrets(t, r, o.dsn)
}

// A v1 row with work that is no longer in the hold table (the v2 relay published it
// from there: deleting its hold row is what that publish does to it) is shown from
// the history with its status marked as of the upgrade, never as the event's state.
func TestTraceV1HistoryStatusIsAsOfTheUpgrade(t *testing.T) {
	ns, o := upgradedPipeline(t)
	o.exec(t, `DELETE FROM `+o.table.WithSuffix(schema.HoldSuffix).Qualified()+` WHERE event_id = 'ev-pending'`)
	r := plugin(t, "trace", "ev-pending", "-n", ns).mustSucceed(t)
	noSecrets(t, r, o.dsn)
	field(t, r.stdout, "history", "public.outbox_event_v1 (moved aside by the upgrade to contract v2)")
	field(t, r.stdout, "status", "PENDING as of the upgrade (rows with work were copied to public.outbox_event_hold and relayed by v2 from there)")
}

// A v2 table made as v2 has no v1 history: its absence is "not there", not an error.
func TestTraceV2UnknownEventWithoutHistory(t *testing.T) {
	ns, o := v2Pipeline(t)
	r := plugin(t, "trace", "nope", "-n", ns, "-p", "orders")
	r.mustFailWith(t, 1, `event "nope" not found in table public.outbox_event of pipeline "orders" (also not archived)`)
	noSecrets(t, r, o.dsn)
}

// trace --aggregate on a table upgraded to contract v2 lists, below the v2 table's
// versions, the older ones from the v1 history, marked so; the limit counts both
// (the newest versions overall), and a version the v2 table has (ev-dead, copied to
// the hold table) is not listed again from the history.
func TestTraceAggregateWithV1History(t *testing.T) {
	ns, o := upgradedPipeline(t)
	o.insert(t, "ev-v2", "o-1", 4, "")
	created := func(table, id string) string {
		t.Helper()
		var at time.Time
		if err := o.db.QueryRow(`SELECT created_at FROM `+table+` WHERE event_id = $1`, id).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return timestamp(at)
	}
	history := "V1 HISTORY table public.outbox_event_v1 (moved aside by the upgrade to contract v2; status as of the upgrade)"

	r := plugin(t, "trace", "--aggregate", "order/o-1", "-n", ns).mustSucceed(t)
	noSecrets(t, r, o.dsn)
	out := r.stdout
	hasRow(t, out, "AGGREGATE order/o-1 pipeline "+ns+"/orders table public.outbox_event (contract v2)")
	hasRow(t, out, "3 ev-dead OrderPlaced DEAD 5 MAX_ATTEMPTS "+created("outbox_event_v1", "ev-dead")+" -")
	hasRow(t, out, "4 ev-v2 OrderPlaced PENDING 0 - "+created("outbox_event", "ev-v2")+" -")
	hasRow(t, out, history)
	hasRow(t, out, "1 ev-sent OrderPlaced SENT 0 - 2026-05-01T10:00:00Z 2026-05-01T10:00:02Z")
	hasRow(t, out, "2 ev-sent-2 OrderPlaced SENT 0 - 2026-05-01T10:00:00Z 2026-05-01T10:00:02Z")
	if n := strings.Count(out, "ev-dead"); n != 1 {
		t.Errorf("ev-dead listed %d times, want once (from the v2 table):\n%s", n, out)
	}
	if i := strings.Index(out, "V1 HISTORY"); i < 0 || strings.Index(out, "ev-v2") > i {
		t.Errorf("the v1 history should come after the v2 table's versions:\n%s", out)
	}

	out = plugin(t, "trace", "--aggregate", "order/o-1", "--limit", "3", "-n", ns).mustSucceed(t).stdout
	if !strings.Contains(out, "ev-sent-2") || strings.Contains(out, "ev-sent ") || !strings.Contains(out, "newest 3 versions") {
		t.Errorf("--limit 3 should show versions 2 (from the history) to 4 and say so:\n%s", out)
	}
	out = plugin(t, "trace", "--aggregate", "order/o-1", "--limit", "2", "-n", ns).mustSucceed(t).stdout
	if strings.Contains(out, "V1 HISTORY") || !strings.Contains(out, "newest 2 versions") {
		t.Errorf("--limit 2 should show the v2 table's versions only and say so:\n%s", out)
	}

	// An aggregate whose only version is in the history (its hold row gone: published).
	o.exec(t, `DELETE FROM `+o.table.WithSuffix(schema.HoldSuffix).Qualified()+` WHERE event_id = 'ev-pending'`)
	out = plugin(t, "trace", "--aggregate", "order/o-3", "-n", ns, "-p", "orders").mustSucceed(t).stdout
	hasRow(t, out, history)
	hasRow(t, out, "1 ev-pending OrderPlaced PENDING 0 - "+created("outbox_event_v1", "ev-pending")+" -")
	plugin(t, "trace", "--aggregate", "order/none", "-n", ns, "-p", "orders").mustFailWith(t, 1,
		`aggregate order/none has no rows in table public.outbox_event of pipeline "orders"`)
}
