package store

import (
	"fmt"
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/testenv/golden"
)

// TestStatementsMatchGoldenFiles: every statement the relay renders, as it sends it,
// is in testdata/<name>.sql (rewrite them with -update), so a change to one reviews
// as an SQL diff.
func TestStatementsMatchGoldenFiles(t *testing.T) {
	tbl := pgident.Table{Schema: "public", Name: "outbox_event"}
	const token = "worker-1/0123456789abcdef"
	n, lease, handover := contract.DefaultBatchSize, contract.DefaultLease, contract.DefaultHandoverAfter
	golden.Statements(t, []golden.Statement{
		{Name: "claim", About: fmt.Sprintf("Claim (polling): token %s, %d rows, lease %s", token, n, lease),
			SQL: claimQuery(tbl, token, n, lease, 0)},
		{Name: "claim_handover", About: fmt.Sprintf("Claim (logical replication): as claim.sql, PENDING rows only after the %s hand-over", handover),
			SQL: claimQuery(tbl, token, n, lease, handover)},
		{Name: "claim_ids", About: fmt.Sprintf("ClaimIDs: the ids e-1, e-2, e-3, token %s, lease %s", token, lease),
			SQL: claimIDsQuery(tbl, token, []string{"e-1", "e-2", "e-3"}, lease)},
		{Name: "mark_sent", About: "MarkSent (prepared): $1 token, $2 ids, $3 partitions, $4 offsets", SQL: markSentSQL(tbl)},
		{Name: "mark_retry", About: "MarkRetry (prepared): $1 token, $2 max attempts, $3 ids, $4 codes, $5 messages, $6 delays (ms), $7 uncounted",
			SQL: markRetrySQL(tbl)},
		{Name: "mark_dead", About: "MarkDead (prepared): $1 token, $2 ids, $3 codes, $4 messages", SQL: markDeadSQL(tbl)},
		{Name: "release", About: "Release (prepared): $1 token, $2 ids", SQL: releaseSQL(tbl)},
		{Name: "backlog", About: "Backlog (prepared): the pending gauges", SQL: statsSQL(tbl)},
		{Name: "waiting", About: "Waiting: does any row wait to be sent now", SQL: waitingSQL(tbl)},
		{Name: "settled", About: "Settled: $1 ids a claim by id left", SQL: settledSQL(tbl)},
		{Name: "report_worker", About: "ReportWorker: $1 worker id, $2 broker up, $3 broker error code", SQL: reportWorkerSQL(tbl)},
		{Name: "remove_worker", About: "RemoveWorker: $1 worker id", SQL: removeWorkerSQL(tbl)},
		{Name: "release_parked", About: "ReleaseParked: $1 ids, $2 the tokens that marked them RETRY", SQL: releaseParkedSQL(tbl)},
	})
}
