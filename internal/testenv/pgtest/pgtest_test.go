package pgtest

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
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

// TestStartStandbyStreamsAndIsReadOnly proves StartStandby gives a real hot standby:
// it reports pg_is_in_recovery(), has the primary's data, follows later commits and
// refuses writes.
func TestStartStandbyStreamsAndIsReadOnly(t *testing.T) {
	srv, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	dsn, primary := srv.OpenDatabase(t) // the standby copies this database too
	ctx := context.Background()
	if _, err := primary.ExecContext(ctx, `CREATE TABLE t (v int); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	sb, err := srv.StartStandby()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop()
	if sb.Port == srv.Port {
		t.Fatalf("standby on the primary's port %d", sb.Port)
	}
	standby, err := sql.Open("postgres", sb.DSN(dsn[strings.LastIndex(dsn, "/")+1:strings.Index(dsn, "?")]))
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Close()
	var rec bool
	if err := standby.QueryRowContext(ctx, `SELECT pg_is_in_recovery()`).Scan(&rec); err != nil || !rec {
		t.Fatalf("standby pg_is_in_recovery() = %v, %v; want true", rec, err)
	}
	if err := primary.QueryRowContext(ctx, `SELECT pg_is_in_recovery()`).Scan(&rec); err != nil || rec {
		t.Fatalf("primary pg_is_in_recovery() = %v, %v; want false", rec, err)
	}
	if _, err := primary.ExecContext(ctx, `INSERT INTO t VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var sum int
		if err := standby.QueryRowContext(ctx, `SELECT coalesce(sum(v), 0) FROM t`).Scan(&sum); err != nil {
			t.Fatal(err)
		}
		if sum == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("standby sum(v) = %d after 30s; want 3 (streamed from the primary)", sum)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, err = standby.ExecContext(ctx, `INSERT INTO t VALUES (3)`)
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("write on the standby: %v; want a read-only error", err)
	}
}

// TestHBAFirstMakesARoleUseItsPassword proves HBAFirst lines win over initdb's trust
// of loopback: the named role needs its password, which stops working once changed,
// and the superuser is still trusted.
func TestHBAFirstMakesARoleUseItsPassword(t *testing.T) {
	srv, err := Start(Options{HBAFirst: []string{"host all pwuser 127.0.0.1/32 scram-sha-256"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	super, err := sql.Open("postgres", srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer super.Close()
	if _, err := super.Exec(`CREATE ROLE pwuser LOGIN PASSWORD 'first'`); err != nil {
		t.Fatal(err)
	}
	login := func(password string) error {
		dsn := strings.Replace(srv.DSN("postgres"), "postgres://postgres@", "postgres://pwuser:"+password+"@", 1)
		db, err := sql.Open("postgres", dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		return db.Ping()
	}
	if err := login("first"); err != nil {
		t.Fatalf("login with the password: %v", err)
	}
	if err := login("wrong"); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Fatalf("login with a wrong password: %v, want password authentication failed", err)
	}
	if _, err := super.Exec(`ALTER ROLE pwuser PASSWORD 'second'`); err != nil {
		t.Fatal(err)
	}
	if err := login("first"); err == nil {
		t.Fatal("the old password still logs in")
	}
	if err := login("second"); err != nil {
		t.Fatalf("login with the new password: %v", err)
	}
}

// TestServerIsTheRequestedVersion: with PG_VERSION set the server that answers is that
// major version (not Debian's default), and without it the one binDir holds.
func TestServerIsTheRequestedVersion(t *testing.T) {
	srv, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	num, err := srv.VersionNum(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(srv.binDir, "postgres"), "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimPrefix(strings.TrimSpace(string(out)), "postgres (PostgreSQL) ")
	want = want[:strings.IndexAny(want, ". ")]
	if v := os.Getenv(VersionEnv); v != "" && v != want {
		t.Fatalf("%s=%s but %s/postgres is %s", VersionEnv, v, srv.binDir, out)
	}
	if got := strconv.Itoa(num / 10000); got != want {
		t.Fatalf("server_version_num %d, want major %s (%s)", num, want, out)
	}
	t.Logf("server_version_num %d from %s", num, srv.binDir)
}

// TestMatrixBinDirSaysHowToInstall: a requested version that is not installed fails
// with the command that installs it; an unsupported one names the supported ones.
func TestMatrixBinDirSaysHowToInstall(t *testing.T) {
	t.Setenv("OUTBOX_PG_VERSIONS_DIR", t.TempDir())
	t.Setenv("PG_BINDIR", "")
	_, err := matrixBinDir("16")
	if err == nil || !strings.Contains(err.Error(), "PostgreSQL 16 is not installed") || !strings.Contains(err.Error(), "hack/install-pg-matrix.sh 16") {
		t.Fatalf("matrixBinDir(16) in an empty directory: %v", err)
	}
	for _, v := range []string{"12", "19", "sixteen"} {
		if _, err := matrixBinDir(v); err == nil || !strings.Contains(err.Error(), "want one of [13 14 15 16 17 18]") {
			t.Errorf("matrixBinDir(%q): %v; want the supported versions named", v, err)
		}
	}
}
