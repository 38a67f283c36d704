package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// The claims' plans on a large backlog behind a long SENT history, on the server under
// test (`make test-pg-matrix` runs this on every supported PostgreSQL): each scan of
// the outbox table is an index scan of the index the statement was shaped for, never a
// sequential or bitmap scan. The planner's choices differ between major versions;
// this is where a version that plans the claim differently shows up.
func TestClaimPlansUseTheirIndexes(t *testing.T) {
	_, db := relaytest.NewDB(t)
	exec(t, db, `INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload, status, sent_at)
		SELECT 's' || g, 'order', 's' || g, 1, 'x', 't', 's' || g, '{}', 'SENT', now() FROM generate_series(1, 50000) g`)
	// A small live backlog first (where the planner would rather sort a bitmap scan's
	// rows), then a large one.
	for _, backlog := range []int{100, 50000} {
		exec(t, db, `DELETE FROM outbox_event WHERE status <> 'SENT'`)
		exec(t, db, fmt.Sprintf(`INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload)
			SELECT 'e' || g, 'order', 'o' || (g %% 10000), g / 10000, 'x', 't', 'o' || g, '{}' FROM generate_series(1, %d) g`, backlog))
		exec(t, db, `UPDATE outbox_event SET status = 'RETRY' WHERE event_id IN (SELECT 'e' || g FROM generate_series(1, 50000, 100) g)`)
		exec(t, db, `UPDATE outbox_event SET status = 'SENDING', lease_until = now() - interval '1 minute', owner_token = 'gone'
			WHERE event_id IN (SELECT 'e' || g FROM generate_series(7, 50000, 250) g)`)
		exec(t, db, `VACUUM ANALYZE outbox_event`)
		t.Run(fmt.Sprintf("backlog %d", backlog), func(t *testing.T) { checkClaimPlans(t, db) })
	}
}

func checkClaimPlans(t *testing.T, db *sql.DB) {
	tok, lease := pq.QuoteLiteral("tok"), pq.QuoteLiteral("30000 milliseconds")
	ids := make([]string, 500)
	for i := range ids {
		ids[i] = pq.QuoteLiteral(fmt.Sprintf("e%d", 20+i))
	}
	dispatch, inflight, pkey := "outbox_event_dispatch_idx", "outbox_event_aggregate_inflight_idx", "outbox_event_pkey"
	for _, c := range []struct {
		name, settings, query string
		want                  map[string]bool // the only indexes the plan may use; true: must use
	}{
		{"polling claim", ClaimSettings, claimSQL(relaytestTable, tok, "500", lease, ""),
			map[string]bool{dispatch: true, inflight: true, pkey: true}},
		{"polling claim (logical-replication hand-over)", ClaimSettings,
			claimSQL(relaytestTable, tok, "500", lease, pq.QuoteLiteral("5000 milliseconds")),
			map[string]bool{dispatch: true, inflight: true, pkey: true}},
		// With a small backlog the planner may read the candidates from the partial
		// dispatch index (its status = 'PENDING' entries are the backlog) rather than
		// probe the primary key 500 times: both are bounded by the hot set, not by the
		// history (PostgreSQL 13-15 do so at a backlog of 100; 16-18 probe the key).
		{"claim by ids", ClaimIDsSettings, claimIDsSQL(relaytestTable, tok, "ARRAY["+strings.Join(ids, ",")+"]", lease),
			map[string]bool{pkey: true, inflight: true, dispatch: false}},
	} {
		t.Run(c.name, func(t *testing.T) { checkPlan(t, db, c.settings, c.query, c.want) })
	}
}

func exec(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%v: %s", err, q)
	}
}

var relaytestTable = relaytest.DefaultTable

// checkPlan explains query after settings (in one transaction, as the claims run) and
// checks every scan of the outbox table.
func checkPlan(t *testing.T, db *sql.DB, settings, query string, want map[string]bool) {
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // explain only
	if _, err := tx.Exec(settings); err != nil {
		t.Fatal(err)
	}
	var out []byte
	if err := tx.QueryRow(`EXPLAIN (FORMAT JSON) ` + query).Scan(&out); err != nil {
		t.Fatal(err)
	}
	var plans []struct{ Plan planNode }
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN output: %v\n%s", err, out)
	}
	used := map[string]bool{}
	for _, n := range plans[0].Plan.scansOf("outbox_event") {
		if _, ok := want[n.Index]; !ok || (n.Type != "Index Scan" && n.Type != "Index Only Scan") {
			t.Errorf("%s of outbox_event (index %q); want index scans of %v", n.Type, n.Index, slices.Sorted(maps.Keys(want)))
		}
		used[n.Index] = true
	}
	for idx, must := range want {
		if must && !used[idx] {
			t.Errorf("the plan does not use %s", idx)
		}
	}
	if t.Failed() {
		t.Logf("plan:\n%s", out)
	} else {
		t.Logf("indexes used: %v", slices.Sorted(maps.Keys(used)))
	}
}

// planNode is the part of EXPLAIN (FORMAT JSON)'s nodes the check reads.
type planNode struct {
	Type     string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Index    string     `json:"Index Name"`
	Plans    []planNode `json:"Plans"`
}

// scansOf lists the nodes under n (n included) that read relation rel.
func (n planNode) scansOf(rel string) []planNode {
	var out []planNode
	if n.Relation == rel && n.Type != "ModifyTable" {
		out = append(out, n)
	}
	for _, c := range n.Plans {
		out = append(out, c.scansOf(rel)...)
	}
	return out
}
