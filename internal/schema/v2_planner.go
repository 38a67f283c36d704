// v2_planner.go: the planner settings every statement that reads shard windows runs
// with (the relay's read and its housekeeping, the operator's status read), kept in
// one place so a setting found necessary for one reaches the others.

package schema

import "strings"

// Setting is one planner setting: a GUC and its value.
type Setting struct{ Name, Value string }

// WindowPlanner keeps the window statements on their indexes, whatever the table's
// statistics say:
//   - no bitmap scans: the planner read a shard's whole window with one and sorted it
//     for every batch (34-56 ms instead of 2 ms for 500 of 3,900 rows);
//   - no sequential scans: on a table of fewer than 128 shards the cursor log is one
//     page when a generic plan is made, and the read's plan scanned it, with a sort,
//     once per shard; on 32 shards with 100,000 rows of one transaction the status
//     read planned part 1's (shard, txid) probe as a scan of the whole outbox table
//     (docs/contract-v2.md, "fewer shards"; the plan tests at 16 and 32 shards);
//   - no parallel plans: the rows come in the order the read relies on (each shard's
//     part after the other);
//   - no JIT: the estimate grows with rows per transaction (each (shard, txid) probe
//     is costed at the table's rows per distinct txid), and past jit_above_cost every
//     read compiled itself first (460-480 ms per read of 2 ms on a table loaded
//     100,000 rows in one transaction; 2 s of a 2.4 s status read of 2,048 shards).
var WindowPlanner = []Setting{
	{"enable_bitmapscan", "off"},
	{"enable_seqscan", "off"},
	{"max_parallel_workers_per_gather", "0"},
	{"jit", "off"},
}

// SetStatements are settings as SET statements, for a session.
func SetStatements(settings []Setting) []string {
	out := make([]string, len(settings))
	for i, s := range settings {
		out[i] = `SET ` + s.Name + ` = ` + s.Value
	}
	return out
}

// SetLocal is settings as one statement that sets them for the rest of the
// transaction.
func SetLocal(settings []Setting) string {
	calls := make([]string, len(settings))
	for i, s := range settings {
		calls[i] = `set_config('` + s.Name + `', '` + s.Value + `', true)`
	}
	return `SELECT ` + strings.Join(calls, ", ")
}
