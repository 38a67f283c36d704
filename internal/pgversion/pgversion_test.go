package pgversion_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	. "github.com/outbox-operator/outbox-operator/internal/pgversion"
	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { pgtest.Main(m, &srv) }

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		num     int
		version string
		ok      bool
	}{
		{90624, "9.6.24", false},
		{120022, "12.22", false},
		{130000, "13.0", true},
		{130023, "13.23", true},
		{150018, "15.18 (Debian 15.18-0+deb12u1)", true},
		{180004, "18.4", true},
		{189999, "18.99", true},
		{190000, "19devel", false},
		{200001, "20.1", false},
	} {
		err := Check(c.num, c.version)
		if c.ok {
			if err != nil {
				t.Errorf("Check(%d) = %v, want nil", c.num, err)
			}
			continue
		}
		var ue *UnsupportedError
		if !errors.As(err, &ue) || ue.VersionNum != c.num || !errors.Is(err, ErrUnsupported) {
			t.Fatalf("Check(%d) = %v, want an *UnsupportedError", c.num, err)
		}
		want := fmt.Sprintf("PostgreSQL %s (server_version_num %d) is not supported: outbox-operator supports PostgreSQL 13 to 18", c.version, c.num)
		if err.Error() != want {
			t.Errorf("Check(%d) = %q\nwant %q", c.num, err, want)
		}
	}
}

func TestParseMajor(t *testing.T) {
	for in, want := range map[string]int{
		"13.23": 13, "16.4 (Debian 16.4-1.pgdg120+1)": 16, "18beta1": 18, "18devel": 18, "17.10": 17,
	} {
		if got, err := ParseMajor(in); err != nil || got != want {
			t.Errorf("ParseMajor(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "devel", "9.6.24", ".5"} {
		if got, err := ParseMajor(in); err == nil {
			t.Errorf("ParseMajor(%q) = %d, want an error", in, got)
		}
	}
}

// TestCheckServerOnARealServer: the real path passes on the server under test (the
// matrix runs it on every supported version) and reads that server's own version.
func TestCheckServerOnARealServer(t *testing.T) {
	_, db := srv.OpenDatabase(t)
	ctx := context.Background()
	if err := CheckServer(ctx, db); err != nil {
		t.Fatalf("CheckServer on the test server: %v", err)
	}
	num, err := srv.VersionNum(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v := os.Getenv(pgtest.VersionEnv); v != "" && fmt.Sprint(Major(num)) != v {
		t.Fatalf("server_version_num %d, but %s=%s", num, pgtest.VersionEnv, v)
	}
	t.Logf("PostgreSQL server_version_num %d accepted", num)
}

// TestCheckServerSaysWhyItCannotAsk: a database that cannot be asked is an error
// naming what was being read, not a refusal of the version.
func TestCheckServerSaysWhyItCannotAsk(t *testing.T) {
	db, err := sql.Open("postgres", srv.DSN("no_such_database"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = CheckServer(context.Background(), db)
	var ue *UnsupportedError
	if err == nil || errors.As(err, &ue) || !strings.Contains(err.Error(), "read the PostgreSQL server version") {
		t.Fatalf("CheckServer on a missing database: %v", err)
	}
}
