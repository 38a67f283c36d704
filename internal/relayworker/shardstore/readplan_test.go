package shardstore

import (
	"strings"
	"testing"
)

// The read's generic plan is made at the connection's first read, when the cursor log
// may hold one row per shard; the log then grows between trims (and while a long
// transaction elsewhere keeps what the trims deleted). With ReadSettings the plan
// probes each shard's newest cursor row by the log's primary key: a plan that scanned
// the log once per shard made every read cost the log's size times the shards held
// (the drain's reads went from 3.5 to 9.2 ms).
func TestReadProbesTheCursorLogByItsKeyAfterItGrew(t *testing.T) {
	f := newFixture(t, 256)
	w := f.worker("w")
	w.rebalance()
	conn, err := f.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range ReadSettings {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.ExecContext(ctx, `PREPARE r(text[], int, int) AS `+readSQL(f.tb, 256)); err != nil {
		t.Fatal(err)
	}
	// As after the bench's bulk load: statistics that say one row per shard.
	if _, err := f.db.Exec(`VACUUM ANALYZE ob_cursor, ob_lease, ob_tick`); err != nil {
		t.Fatal(err)
	}
	tokens := "ARRAY['" + strings.Join(w.leases.Tokens(), "','") + "']"
	if _, err := conn.ExecContext(ctx, `EXECUTE r(`+tokens+`, 500, 0)`); err != nil { // the generic plan: one cursor row per shard
		t.Fatal(err)
	}
	if _, err := f.db.Exec(`INSERT INTO ob_cursor (shard, lo_tick) SELECT g % 256, 1 FROM generate_series(1, 100000) g`); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.QueryContext(ctx, `EXPLAIN EXECUTE r(`+tokens+`, 500, 0)`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "Index Scan Backward using ob_cursor_pkey on ob_cursor") || strings.Contains(text, "Seq Scan on ob_cursor") {
		t.Fatalf("the read does not probe the cursor log by its primary key:\n%s", text)
	}
}
