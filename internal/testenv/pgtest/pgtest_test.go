package pgtest

import (
	"context"
	"database/sql"
	"testing"
)

// TestKill9AndRestartKeepsCommittedRows proves the fault helpers work: a committed row
// survives a SIGKILL of the whole server and a restart with crash recovery.
func TestKill9AndRestartKeepsCommittedRows(t *testing.T) {
	srv, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	dsn := srv.NewDatabase(t)
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (v int); INSERT INTO t VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	if err := srv.Kill9(); err != nil {
		t.Fatal(err)
	}
	if err := db.PingContext(ctx); err == nil {
		t.Fatal("ping succeeded against a killed server")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := db.QueryRowContext(ctx, `SELECT v FROM t`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != 42 {
		t.Fatalf("got %d, want 42", v)
	}
}
