package outboxstats

import (
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/testenv/golden"
)

// TestStatementsMatchGoldenFiles: every statement the operator's status reads render
// is in testdata/<name>.sql (rewrite them with -update), so a change to one reviews as
// an SQL diff.
func TestStatementsMatchGoldenFiles(t *testing.T) {
	tbl := pgident.Table{Schema: "public", Name: "outbox_event"}
	for _, st := range []struct{ name, about, sql string }{
		{"statement_timeout", "Read and ReadLastArchiveRun: first in their read-only transaction", setStatementTimeout},
		{"hot_set", "Read: the non-terminal rows by status", hotSetSQL(tbl)},
		{"dead_count", "Read: the DEAD rows", deadCountSQL(tbl)},
		{"last_publish", "Read: the newest sent_at", lastPublishSQL(tbl)},
		{"workers", "Read, last: the fresh worker reports", workersSQL(tbl.WithSuffix(schema.WorkersSuffix))},
		{"last_archive_run", "ReadLastArchiveRun: the newest run of policy $1", lastArchiveRunSQL(tbl.WithSuffix(schema.ArchiveRunsSuffix))},
		{"replay_audit", "ReadReplayAudit: the audit row of replay $1", replayAuditSQL(tbl)},
	} {
		t.Run(st.name, func(t *testing.T) { golden.SQL(t, st.name, st.about, st.sql) })
	}
}
