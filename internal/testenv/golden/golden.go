// Package golden keeps rendered SQL reviewable as SQL: a test compares each statement
// the code renders with testdata/<name>.sql in its package, and `go test -update`
// rewrites the files instead, so a change to a statement shows in review as a diff of
// the .sql file next to the Go change that made it.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ with what the code renders")

// Statement is one rendered statement and the name of its golden file.
type Statement struct {
	Name  string // testdata/<Name>.sql
	About string // what was rendered, with which values: the file's first line
	SQL   string // exactly as the code sends it
}

// Statements checks each statement with SQL, in a subtest of its name.
func Statements(t *testing.T, sts []Statement) {
	t.Helper()
	for _, st := range sts {
		t.Run(st.Name, func(t *testing.T) { SQL(t, st.Name, st.About, st.SQL) })
	}
}

// SQL compares sql, the statement as the code sends it, with testdata/<name>.sql,
// whose first line is "-- " + about (what was rendered, with which values). With
// -update it writes the file instead.
func SQL(t testing.TB, name, about, sql string) {
	t.Helper()
	path := filepath.Join("testdata", name+".sql")
	rendered := "-- " + about + "\n" + sql + "\n"
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(rendered), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	stored, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with go test -run %s -update)", err, t.Name())
	}
	if string(stored) != rendered {
		t.Errorf("%s differs from the rendered statement; if the change is meant, rewrite it with go test -run %s -update and review the diff.\nrendered:\n%s",
			path, t.Name(), rendered)
	}
}
