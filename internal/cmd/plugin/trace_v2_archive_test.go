package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/archive"
)

// archiveV2 is one `relayworker archive` run in archive mode on o's table, by the
// archive package's own entry point, with the retentions its v2 tests use.
func archiveV2(t *testing.T, o outboxDB) archive.Result {
	t.Helper()
	res, err := archive.Run(context.Background(), o.db, archive.Options{Table: o.table, DSN: o.dsn, Mode: "archive",
		BatchSize: 2, SentRetention: time.Hour, DeadRetention: 24 * time.Hour}, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// archivedV2Pipeline is v2Pipeline with ev-a-1, ev-b-1 and ev-c-1 written two hours
// ago and ev-c-1's DEAD hold row two days old (4 attempts), after one archive run: their outbox
// rows are archived PASSED, ev-c-1's hold row DEAD; the batch log row (written now)
// is kept; ev-d-1 (new, not passed) stays.
func archivedV2Pipeline(t *testing.T) (string, outboxDB) {
	t.Helper()
	ns, o := v2PipelineSet(t, `created_at = now() - interval '2 hours'`)
	// Aged as the archive package's own tests age it: by hand, there being no clock
	// to move. The attempts (0 for a rejected event) are set apart from the 0 a
	// missing count would read as.
	o.exec(t, `UPDATE outbox_event_hold SET updated_at = now() - interval '48 hours', attempts = 4`)
	if res := archiveV2(t, o); res.SentMoved != 3 || res.DeadMoved != 1 || res.BatchLogTrims != 0 {
		t.Fatalf("archive run %+v, want 3 passed, 1 dead, no batch row", res)
	}
	return ns, o
}

// archivedAt is the newest archive time of event id, as trace prints it.
func archivedAt(t *testing.T, o outboxDB, id string) string {
	t.Helper()
	var at time.Time
	if err := o.db.QueryRow(`SELECT max(archived_at) FROM outbox_event_archive WHERE event_id = $1`, id).Scan(&at); err != nil {
		t.Fatal(err)
	}
	return timestamp(at)
}

// trace on a v2 table finds an event retention archived: a PASSED one with the batch
// log row that published it while the batch log keeps it, and says so once that is
// trimmed; a DEAD one with its attempts and code (its newest archive row: its outbox
// row was archived PASSED too), never the message or the payload. An event still in
// the table is the view's, and an unknown one still fails.
func TestTraceV2ArchivedEvent(t *testing.T) {
	ns, o := archivedV2Pipeline(t)
	header := func(id string) string {
		return "EVENT " + id + " pipeline " + ns + "/orders table public.outbox_event_archive (contract v2, archived)"
	}

	r := plugin(t, "trace", "ev-b-1", "-n", ns).mustSucceed(t)
	noSecrets(t, r, o.dsn)
	out := r.stdout
	hasRow(t, out, header("ev-b-1"))
	field(t, out, "status", "PASSED")
	field(t, out, "archived", archivedAt(t, o, "ev-b-1")+" (state PASSED: every cursor had passed it)")
	field(t, out, "attempts", "-")
	field(t, out, "aggregate", "order/b version 1")
	field(t, out, "broker", "partition 1, offset 1098")
	hasBatchLine(t, o, out)

	r = plugin(t, "trace", "ev-c-1", "-n", ns, "-p", "orders").mustSucceed(t)
	noSecrets(t, r, o.dsn)
	out = r.stdout
	hasRow(t, out, header("ev-c-1"))
	field(t, out, "status", "DEAD")
	field(t, out, "archived", archivedAt(t, o, "ev-c-1")+" (state DEAD: a DEAD hold row past the dead retention)")
	field(t, out, "attempts", "4")
	field(t, out, "last error", "MESSAGE_TOO_LARGE")
	field(t, out, "broker", "-")
	if strings.Contains(out, "too large") {
		t.Errorf("the error message is shown:\n%s", out)
	}

	r = plugin(t, "trace", "ev-d-1", "-n", ns).mustSucceed(t)
	noSecrets(t, r, o.dsn)
	hasRow(t, r.stdout, "EVENT ev-d-1 pipeline "+ns+"/orders table public.outbox_event (contract v2)")
	field(t, r.stdout, "status", "PENDING")

	r = plugin(t, "trace", "nope", "-n", ns, "-p", "orders")
	r.mustFailWith(t, 1, `event "nope" not found in table public.outbox_event of pipeline "orders" (also not archived)`)
	noSecrets(t, r, o.dsn)

	// The batch log's own retention: its row aged past sentRetention goes in the next run.
	o.exec(t, `UPDATE outbox_event_batch SET at = now() - interval '48 hours'`)
	if res := archiveV2(t, o); res.BatchLogTrims != 1 {
		t.Fatalf("archive run %+v, want the batch row trimmed", res)
	}
	r = plugin(t, "trace", "ev-b-1", "-n", ns).mustSucceed(t)
	noSecrets(t, r, o.dsn)
	field(t, r.stdout, "status", "PASSED")
	field(t, r.stdout, "batch", "-")
	field(t, r.stdout, "broker", "not in the batch log (trimmed by its own retention, or published before it recorded seqs)")
}

// No v2 archive (dropped: Delete-mode retention; or a table of another shape under
// the name) is "not there", not an error, as a missing v1 archive is.
func TestTraceV2WithoutArchive(t *testing.T) {
	ns, o := v2Pipeline(t)
	notFound := `event "nope" not found in table public.outbox_event of pipeline "orders" (also not archived)`
	o.exec(t, `DROP TABLE outbox_event_archive`)
	r := plugin(t, "trace", "nope", "-n", ns, "-p", "orders")
	r.mustFailWith(t, 1, notFound)
	noSecrets(t, r, o.dsn)
	o.exec(t, `CREATE TABLE outbox_event_archive (event_id text, status text)`)
	r = plugin(t, "trace", "nope", "-n", ns, "-p", "orders")
	r.mustFailWith(t, 1, notFound)
	noSecrets(t, r, o.dsn)
}
