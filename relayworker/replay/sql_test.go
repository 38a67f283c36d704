package replay

import (
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/testenv/golden"
)

// TestStatementsMatchGoldenFiles: every statement a replay renders is in
// testdata/<name>.sql (rewrite them with -update), so a change to one reviews as an
// SQL diff.
func TestStatementsMatchGoldenFiles(t *testing.T) {
	tbl := pgident.Table{Schema: "public", Name: "outbox_event"}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	every := Selector{EventIDs: []string{"e-1"}, EventType: "T", AggregateType: "A", AggregateID: "1",
		ErrorCode: "X", Destination: "d", CreatedAfter: &at, CreatedBefore: &at}
	matchAll, _ := matchSQL(tbl, every, 1001)
	matchType, _ := matchSQL(tbl, Selector{EventType: "T"}, 1001)
	for _, st := range []struct{ name, about, sql string }{
		{"read_audit", "begin: the audit row of replay $1", readAuditSQL(tbl)},
		{"insert_audit", "begin: record a new replay", insertAuditSQL(tbl)},
		{"finish_audit", "finish: the final phase and counts", finishAuditSQL(tbl)},
		{"match_every_filter", "match: a selector with every filter set", matchAll},
		{"match_event_type", "match: a selector with only an event type", matchType},
		{"hand_back", "handBack: $1 ids back to PENDING for replay $2", handBackSQL(tbl)},
		{"progress", "handBack: record how far replay $1 got, in the same transaction", progressSQL(tbl)},
		{"count", "settle and finish: SENT, DEAD and in-flight among $1 ids", countSQL(tbl)},
	} {
		t.Run(st.name, func(t *testing.T) { golden.SQL(t, st.name, st.about, st.sql) })
	}
}
