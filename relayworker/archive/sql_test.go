package archive

import (
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/testenv/golden"
)

// TestStatementsMatchGoldenFiles: every statement an archive run renders is in
// testdata/<name>.sql (rewrite them with -update), so a change to one reviews as an
// SQL diff.
func TestStatementsMatchGoldenFiles(t *testing.T) {
	tbl := pgident.Table{Schema: "public", Name: "outbox_event"}
	for _, st := range []struct{ name, about, sql string }{
		{"archive_sent", "moveBatch, archive mode, SENT rows by sent_at", moveSQL(tbl, "archive", "sent_at")},
		{"archive_dead", "moveBatch, archive mode, DEAD rows by updated_at", moveSQL(tbl, "archive", "updated_at")},
		{"delete_sent", "moveBatch, delete mode, SENT rows by sent_at", moveSQL(tbl, "delete", "sent_at")},
		{"delete_dead", "moveBatch, delete mode, DEAD rows by updated_at", moveSQL(tbl, "delete", "updated_at")},
		{"trim_consumer_log", "trimConsumerLog: finished dedup rows past the retention", trimConsumerLogSQL(consumeTable(tbl))},
		{"insert_run", "insertRun: the run's row", insertRunSQL(tbl)},
		{"trim_runs", "insertRun: the policy's runs older than the newest ArchiveRunsKept", trimRunsSQL(tbl)},
	} {
		t.Run(st.name, func(t *testing.T) { golden.SQL(t, st.name, st.about, st.sql) })
	}
}
