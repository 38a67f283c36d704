package plugin

import (
	"strings"
	"testing"
)

// field checks a "  name: value" line of a trace.
func field(t *testing.T, out, name, want string) {
	t.Helper()
	hasRow(t, out, name+": "+want)
}

// noSecrets fails when any output shows the DSN or the payload.
func noSecrets(t *testing.T, r result, dsn string) {
	t.Helper()
	for _, s := range []string{dsn, "postgres://", `"secret":"payload"`} {
		if strings.Contains(r.stdout+r.stderr, s) {
			t.Fatalf("output contains %q:\n%s%s", s, r.stdout, r.stderr)
		}
	}
}

func TestTraceSentEvent(t *testing.T) {
	ns, o := pipelineWithDB(t)
	o.insert(t, "ev-sent", "o-1", 1, `status = 'SENT', sent_at = '2026-05-01T10:00:02Z', created_at = '2026-05-01T10:00:00Z',
		updated_at = '2026-05-01T10:00:02Z', broker_partition = 3, broker_offset = 1234`)
	r := plugin(t, "trace", "ev-sent", "-n", ns, "--pipeline", "orders").mustSucceed(t)
	noSecrets(t, r, o.dsn)
	out := r.stdout
	hasRow(t, out, "EVENT ev-sent pipeline "+ns+"/orders table public.outbox_event")
	field(t, out, "status", "SENT")
	field(t, out, "attempts", "0")
	field(t, out, "last error", "-")
	field(t, out, "lease until", "-")
	field(t, out, "owner token", "-")
	field(t, out, "aggregate", "order/o-1 version 1")
	field(t, out, "destination", "topic orders, key o-1")
	field(t, out, "created", "2026-05-01T10:00:00Z")
	field(t, out, "sent", "2026-05-01T10:00:02Z")
	field(t, out, "updated", "2026-05-01T10:00:02Z")
	field(t, out, "broker", "partition 3, offset 1234")
	hasRow(t, out, "REPLAY AUDIT (public.outbox_event_replay_audit): no replay mentions this event")
}

func TestTraceDeadEventWithReplayAudit(t *testing.T) {
	ns, o := pipelineWithDB(t)
	o.insert(t, "ev-dead", "o-2", 1, `status = 'DEAD', retry_count = 12, owner_token = 'w1:abc',
		lease_until = '2026-05-01T10:05:00Z', last_error_code = 'MAX_ATTEMPTS',
		last_error_message = 'BROKER_UNAVAILABLE: dial tcp: connection refused'`)
	o.exec(t, `INSERT INTO `+o.table.WithSuffix("_replay_audit").Qualified()+` (replay_id, requested_by, reason, selector, dry_run,
		phase, matched, replayed, succeeded, dead_again, started_at, event_ids)
		VALUES ('shop/fix/u1', 'oncall', 'INC-7: broker back', '{"errorCode":"MAX_ATTEMPTS"}', true, 'Succeeded', 4, 0, 0, 0,
		'2026-05-01T11:00:00Z', '["ev-other","ev-dead"]'),
		('shop/unrelated/u2', 'oncall', 'other', '{"eventType":"X"}', false, 'Succeeded', 1, 1, 1, 0, now(), '["ev-other"]')`)

	out := plugin(t, "trace", "ev-dead", "-n", ns).mustSucceed(t).stdout
	field(t, out, "status", "DEAD")
	field(t, out, "attempts", "12")
	field(t, out, "last error", "MAX_ATTEMPTS: BROKER_UNAVAILABLE: dial tcp: connection refused")
	field(t, out, "lease until", "2026-05-01T10:05:00Z")
	field(t, out, "owner token", "w1:abc")
	field(t, out, "sent", "-")
	field(t, out, "broker", "-")
	hasRow(t, out, "REPLAY AUDIT (public.outbox_event_replay_audit)")
	hasRow(t, out, "shop/fix/u1 Succeeded true 4 0 0 0 oncall INC-7: broker back 2026-05-01T11:00:00Z -")
	if strings.Contains(out, "shop/unrelated") {
		t.Errorf("an audit row that does not mention the event is shown:\n%s", out)
	}
}

func TestTraceArchivedEvent(t *testing.T) {
	ns, o := pipelineWithDB(t)
	o.insert(t, "ev-old", "o-3", 1, `status = 'SENT', sent_at = '2026-04-01T00:00:01Z', broker_partition = 0, broker_offset = 7`)
	o.exec(t, `INSERT INTO `+o.table.WithSuffix("_archive").Qualified()+` SELECT *, '2026-04-09T00:00:00Z' FROM `+
		o.table.Qualified()+` WHERE event_id = 'ev-old'`)
	o.exec(t, `DELETE FROM `+o.table.Qualified()+` WHERE event_id = 'ev-old'`)

	out := plugin(t, "trace", "ev-old", "-n", ns, "-p", "orders").mustSucceed(t).stdout
	hasRow(t, out, "EVENT ev-old pipeline "+ns+"/orders table public.outbox_event_archive (archived)")
	field(t, out, "status", "SENT")
	field(t, out, "archived", "2026-04-09T00:00:00Z")
	field(t, out, "broker", "partition 0, offset 7")
}

func TestTraceUnknownEvent(t *testing.T) {
	ns, o := pipelineWithDB(t)
	r := plugin(t, "trace", "nope", "-n", ns, "--pipeline", "orders")
	r.mustFailWith(t, 1, `event "nope" not found in table public.outbox_event of pipeline "orders" (also not archived)`)
	noSecrets(t, r, o.dsn)

	// Without --pipeline every pipeline is searched, and the message lists them.
	o2 := newOutboxDB(t, "billing_outbox")
	createSecret(t, ns, "billing-db", map[string]string{"dsn": o2.dsn})
	pipeline(t, ns, "billing", "billing-db", "billing_outbox")
	plugin(t, "trace", "nope", "-n", ns).mustFailWith(t, 1,
		`event "nope" not found in the tables of pipelines billing (public.billing_outbox), orders (public.outbox_event) in namespace "`+ns+`" (also not archived)`)
}

func TestTraceSearchesEveryPipeline(t *testing.T) {
	ns, _ := pipelineWithDB(t)
	o2 := newOutboxDB(t, "billing_outbox")
	createSecret(t, ns, "billing-db", map[string]string{"dsn": o2.dsn})
	pipeline(t, ns, "billing", "billing-db", "billing_outbox")
	pipeline(t, ns, "broken", "absent", "") // searched last; its problem is a warning
	o2.insert(t, "ev-bill", "b-1", 1, "")

	r := plugin(t, "trace", "ev-bill", "-n", ns).mustSucceed(t)
	hasRow(t, r.stdout, "EVENT ev-bill pipeline "+ns+"/billing table public.billing_outbox")
	field(t, r.stdout, "status", "PENDING")
	if want := `warning: skipped pipeline "broken": Secret "absent" not found in namespace "` + ns + `"`; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q lacks %q", r.stderr, want)
	}
}

func TestTraceAggregate(t *testing.T) {
	ns, o := pipelineWithDB(t)
	o.insert(t, "a-1", "o-9", 1, `status = 'SENT', sent_at = '2026-05-01T10:00:00Z', created_at = '2026-05-01T09:00:00Z'`)
	o.insert(t, "a-2", "o-9", 2, `status = 'DEAD', last_error_code = 'MESSAGE_TOO_LARGE', created_at = '2026-05-01T09:00:01Z'`)
	o.insert(t, "a-3", "o-9", 3, `created_at = '2026-05-01T09:00:02Z'`)
	o.insert(t, "other", "o-10", 1, "")

	out := plugin(t, "trace", "--aggregate", "order/o-9", "-n", ns).mustSucceed(t).stdout
	hasRow(t, out, "AGGREGATE order/o-9 pipeline "+ns+"/orders table public.outbox_event")
	hasRow(t, out, "VERSION EVENT ID EVENT TYPE STATUS ATTEMPTS LAST ERROR CREATED SENT")
	hasRow(t, out, "1 a-1 OrderPlaced SENT 0 - 2026-05-01T09:00:00Z 2026-05-01T10:00:00Z")
	hasRow(t, out, "2 a-2 OrderPlaced DEAD 0 MESSAGE_TOO_LARGE 2026-05-01T09:00:01Z -")
	hasRow(t, out, "3 a-3 OrderPlaced PENDING 0 - 2026-05-01T09:00:02Z -")
	if strings.Contains(out, "other") {
		t.Errorf("another aggregate's row is listed:\n%s", out)
	}

	out = plugin(t, "trace", "--aggregate", "order/o-9", "--limit", "2", "-n", ns).mustSucceed(t).stdout
	if strings.Contains(out, "a-1") || !strings.Contains(out, "newest 2 versions") {
		t.Errorf("--limit 2 should show versions 2 and 3 and say so:\n%s", out)
	}
	plugin(t, "trace", "--aggregate", "order/none", "-n", ns, "-p", "orders").mustFailWith(t, 1,
		`aggregate order/none has no rows in table public.outbox_event of pipeline "orders"`)
}
