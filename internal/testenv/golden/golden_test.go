package golden

import (
	"testing"
)

// recorder is a testing.TB that notes failures instead of failing the test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }

func TestSQLComparesWithTheStoredFile(t *testing.T) {
	if *update {
		t.Skip("-update would rewrite testdata/example.sql with each case")
	}
	for _, c := range []struct {
		name, file, about, sql string
		fails                  bool
	}{
		{"same", "example", "an example", "SELECT 1", false},
		{"other statement", "example", "an example", "SELECT 2", true},
		{"other description", "example", "another example", "SELECT 1", true},
		{"no file", "missing", "an example", "SELECT 1", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{TB: t}
			SQL(r, c.file, c.about, c.sql)
			if r.failed != c.fails {
				t.Fatalf("failed = %v, want %v", r.failed, c.fails)
			}
		})
	}
}
