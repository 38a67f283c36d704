package store_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
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
	if _, err := tx.Exec(store.ClaimSettings); err != nil {
		t.Fatal(err)
	}
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

func TestExplainClaimIDs(t *testing.T) {
	if os.Getenv("EXPLAIN") == "" {
		t.Skip("set EXPLAIN=1")
	}
	_, db := relaytest.NewDB(t)
	db.Exec(`INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload)
		SELECT 'e' || g, 'order', 'o' || (g % 10000), g / 10000, 'x', 't', 'o' || g, '{}' FROM generate_series(1, 50000) g`)
	db.Exec(`VACUUM ANALYZE outbox_event`)
	ids := make([]string, 500)
	for i := range ids {
		ids[i] = fmt.Sprintf("e%d", 20000+i)
	}
	q := `EXPLAIN (ANALYZE, BUFFERS) ` + store.ClaimIDsSQL(relaytest.DefaultTable)
	tx, _ := db.Begin()
	defer tx.Rollback()
	if _, err := tx.Exec(store.ClaimIDsSettings); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(q, "tok", pq.Array(ids), "30 seconds")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		t.Log(s)
	}
}
