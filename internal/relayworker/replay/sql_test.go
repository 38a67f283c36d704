package replay

import (
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/testenv/golden"
)

// TestStatementsMatchGoldenFiles: every statement a replay renders is in
// testdata/<name>.sql (rewrite them with -update), so a change to one reviews as an
// SQL diff. v2_* are a v2 table's (the DEAD rows in its hold table).
func TestStatementsMatchGoldenFiles(t *testing.T) {
	tbl := pgident.Table{Schema: "public", Name: "outbox_event"}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	every := Selector{EventIDs: []string{"e-1"}, EventType: "T", AggregateType: "A", AggregateID: "1",
		ErrorCode: "X", Destination: "d", CreatedAfter: &at, CreatedBefore: &at}
	v1, v2 := statementsFor(tbl, schema.ContractV1), statementsFor(tbl, schema.ContractV2)
	matchAll, _ := matchSQL(v1, every, 1001)
	matchType, _ := matchSQL(v1, Selector{EventType: "T"}, 1001)
	v2MatchAll, _ := matchSQL(v2, every, 1001)
	golden.Statements(t, []golden.Statement{
		{Name: "read_audit", About: "begin: the audit row of replay $1", SQL: readAuditSQL(tbl)},
		{Name: "insert_audit", About: "begin: record a new replay", SQL: insertAuditSQL(tbl)},
		{Name: "finish_audit", About: "finish: the final phase and counts", SQL: finishAuditSQL(tbl)},
		{Name: "match_every_filter", About: "match: a selector with every filter set", SQL: matchAll},
		{Name: "match_event_type", About: "match: a selector with only an event type", SQL: matchType},
		{Name: "hand_back", About: "handBack: $1 ids back to PENDING for replay $2", SQL: v1.handBack},
		{Name: "progress", About: "handBack: record how far replay $1 got, in the same transaction", SQL: progressSQL(tbl)},
		{Name: "count", About: "settle and finish: SENT, DEAD and in-flight among $1 ids", SQL: v1.count},
		{Name: "v2_match_every_filter", About: "match, v2: DEAD hold rows, a selector with every filter set", SQL: v2MatchAll},
		{Name: "v2_hand_back", About: "handBack, v2: $1 DEAD hold rows back to RETRY, due now, for replay $2", SQL: v2.handBack},
		{Name: "v2_count", About: "settle and finish, v2: sent (hold row gone), DEAD and in-flight among $1 ids", SQL: v2.count},
	})
}
