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
	golden.Statements(t, []golden.Statement{
		{Name: "archive_sent", About: "moveBatch, archive mode, SENT rows by sent_at", SQL: moveSQL(tbl, "archive", "sent_at")},
		{Name: "archive_dead", About: "moveBatch, archive mode, DEAD rows by updated_at", SQL: moveSQL(tbl, "archive", "updated_at")},
		{Name: "delete_sent", About: "moveBatch, delete mode, SENT rows by sent_at", SQL: moveSQL(tbl, "delete", "sent_at")},
		{Name: "delete_dead", About: "moveBatch, delete mode, DEAD rows by updated_at", SQL: moveSQL(tbl, "delete", "updated_at")},
		{Name: "trim_consumer_log", About: "trimConsumerLog: finished dedup rows past the retention", SQL: trimConsumerLogSQL(consumeTable(tbl))},
		{Name: "v2_archive_passed", About: "movePassedBatch, archive mode: v2 outbox rows every cursor passed", SQL: movePassedSQL(tbl, "archive")},
		{Name: "v2_delete_passed", About: "movePassedBatch, delete mode: v2 outbox rows every cursor passed", SQL: movePassedSQL(tbl, "delete")},
		{Name: "v2_archive_dead_hold", About: "runV2, archive mode: DEAD hold rows by updated_at", SQL: moveDeadHoldSQL(tbl, "archive")},
		{Name: "v2_delete_dead_hold", About: "runV2, delete mode: DEAD hold rows by updated_at", SQL: moveDeadHoldSQL(tbl, "delete")},
		{Name: "v2_trim_batch_log", About: "runV2: batch log rows older than the sent retention", SQL: trimBatchLogSQL(tbl)},
		{Name: "insert_run", About: "insertRun: the run's row", SQL: insertRunSQL(tbl)},
		{Name: "trim_runs", About: "insertRun: the policy's runs older than the newest ArchiveRunsKept", SQL: trimRunsSQL(tbl)},
	})
}
