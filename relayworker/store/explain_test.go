package store_test

import (
	"os"
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/relaytest"
	"github.com/outbox-operator/outbox-operator/relayworker/store"
)

func TestExplainClaim(t *testing.T) {
	if os.Getenv("EXPLAIN") == "" {
		t.Skip("set EXPLAIN=1")
	}
	_, db := relaytest.NewDB(t)
	db.Exec(`INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload)
		SELECT 'e' || g, 'order', 'o' || g, 1, 'x', 't', 'o' || g, '{}' FROM generate_series(1, 50000) g`)
	db.Exec(`VACUUM ANALYZE outbox_event`)
	q := `EXPLAIN (ANALYZE, BUFFERS) ` + store.ClaimSQL(relaytest.DefaultTable)
	tx, _ := db.Begin()
	defer tx.Rollback()
	rows, err := tx.Query(q, "tok", 500, "30 seconds")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		t.Log(s)
	}
}
