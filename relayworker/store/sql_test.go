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
	for _, st := range []struct{ name, about, sql string }{
		{"claim", fmt.Sprintf("Claim (polling): token %s, %d rows, lease %s", token, n, lease),
			claimQuery(tbl, token, n, lease, 0)},
		{"claim_handover", fmt.Sprintf("Claim (logical replication): as claim.sql, PENDING rows only after the %s hand-over", handover),
			claimQuery(tbl, token, n, lease, handover)},
		{"claim_ids", fmt.Sprintf("ClaimIDs: the ids e-1, e-2, e-3, token %s, lease %s", token, lease),
			claimIDsQuery(tbl, token, []string{"e-1", "e-2", "e-3"}, lease)},
		{"mark_sent", "MarkSent (prepared): $1 token, $2 ids, $3 partitions, $4 offsets", markSentSQL(tbl)},
		{"mark_retry", "MarkRetry (prepared): $1 token, $2 max attempts, $3 ids, $4 codes, $5 messages, $6 delays (ms), $7 uncounted",
			markRetrySQL(tbl)},
		{"mark_dead", "MarkDead (prepared): $1 token, $2 ids, $3 codes, $4 messages", markDeadSQL(tbl)},
		{"release", "Release (prepared): $1 token, $2 ids", releaseSQL(tbl)},
		{"backlog", "Backlog (prepared): the pending gauges", statsSQL(tbl)},
		{"waiting", "Waiting: does any row wait to be sent now", waitingSQL(tbl)},
		{"settled", "Settled: $1 ids a claim by id left", settledSQL(tbl)},
		{"report_worker", "ReportWorker: $1 worker id, $2 broker up, $3 broker error code", reportWorkerSQL(tbl)},
		{"remove_worker", "RemoveWorker: $1 worker id", removeWorkerSQL(tbl)},
		{"release_parked", "ReleaseParked: $1 ids, $2 the tokens that marked them RETRY", releaseParkedSQL(tbl)},
	} {
		t.Run(st.name, func(t *testing.T) { golden.SQL(t, st.name, st.about, st.sql) })
	}
}
