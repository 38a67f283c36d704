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
	golden.Statements(t, []golden.Statement{
		{Name: "statement_timeout", About: "Read and ReadLastArchiveRun: first in their read-only transaction", SQL: setStatementTimeout},
		{Name: "hot_set", About: "Read: the non-terminal rows by status", SQL: hotSetSQL(tbl)},
		{Name: "dead_count", About: "Read: the DEAD rows", SQL: deadCountSQL(tbl)},
		{Name: "last_publish", About: "Read: the newest sent_at", SQL: lastPublishSQL(tbl)},
		{Name: "v2_settings", About: "Read of a v2 table: first after the contract, for the rest of the transaction", SQL: v2Settings},
		{Name: "v2_windows", About: "Read of a v2 table: the rows of every shard's open windows ($1 the per-shard cap), shards worked on and abandoned", SQL: v2WindowsSQL(tbl)},
		{Name: "v2_hold", About: "Read of a v2 table: the hold rows by state, the oldest open one", SQL: v2HoldSQL(tbl)},
		{Name: "v2_last_publish", About: "Read of a v2 table: the newest batch log row that published an event", SQL: v2LastPublishSQL(tbl)},
		{Name: "workers", About: "Read, last: the fresh worker reports", SQL: workersSQL(tbl.WithSuffix(schema.WorkersSuffix))},
		{Name: "last_archive_run", About: "ReadLastArchiveRun: the newest run of policy $1", SQL: lastArchiveRunSQL(tbl.WithSuffix(schema.ArchiveRunsSuffix))},
		{Name: "replay_audit", About: "ReadReplayAudit: the audit row of replay $1", SQL: replayAuditSQL(tbl)},
	})
}
