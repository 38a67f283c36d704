// Package pgident validates and quotes PostgreSQL identifiers that come from users
// (schema and table names), so they are never spliced into SQL raw.
package pgident

import (
	"fmt"
	"regexp"
	"strings"
)

// MaxLen is PostgreSQL's NAMEDATALEN-1: longer names are silently truncated by the
// server, which would make two different user inputs address the same table.
const MaxLen = 63

// suffixRoom is kept free so derived names such as "<table>_replay_audit" still fit.
const suffixRoom = len("_replay_audit")

var identRe = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// Validate reports whether name is an acceptable unquoted-style identifier: lower-case
// letters, digits and underscores, not starting with a digit, at most MaxLen bytes.
// Quoted identifiers with mixed case or punctuation are refused on purpose: they are a
// common source of "relation does not exist" confusion at 3 a.m.
func Validate(kind, name string) error {
	if name == "" {
		return fmt.Errorf("%s name is empty", kind)
	}
	if len(name) > MaxLen {
		return fmt.Errorf("%s name %q is longer than %d characters", kind, name, MaxLen)
	}
	if !identRe.MatchString(name) {
		return fmt.Errorf("%s name %q is not a valid identifier (use lower-case letters, digits and _; not starting with a digit)", kind, name)
	}
	return nil
}

// Quote returns name as a double-quoted identifier, doubling embedded quotes.
func Quote(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// Table names a table inside a schema.
type Table struct {
	Schema string
	Name   string
}

// NewTable validates schema and name and returns the Table. The table name must leave
// room for the side-table suffixes the relay derives from it.
func NewTable(schema, name string) (Table, error) {
	if err := Validate("schema", schema); err != nil {
		return Table{}, err
	}
	if err := Validate("table", name); err != nil {
		return Table{}, err
	}
	if len(name)+suffixRoom > MaxLen {
		return Table{}, fmt.Errorf("table name %q is too long: at most %d characters so side tables (%s_replay_audit) fit", name, MaxLen-suffixRoom, name)
	}
	return Table{Schema: schema, Name: name}, nil
}

// Qualified is the quoted "schema"."table" form for SQL text.
func (t Table) Qualified() string { return Quote(t.Schema) + "." + Quote(t.Name) }

// String is the unquoted schema.table form for logs and messages.
func (t Table) String() string { return t.Schema + "." + t.Name }

// WithSuffix derives a side table (e.g. "_archive") in the same schema.
func (t Table) WithSuffix(suffix string) Table { return Table{Schema: t.Schema, Name: t.Name + suffix} }

// Ident quotes a derived identifier (index, channel) built from the table name.
func (t Table) Ident(suffix string) string { return Quote(t.Name + suffix) }

// QuoteLiteral quotes s as an SQL string literal (standard_conforming_strings, on
// since PostgreSQL 9.1): for names passed to functions such as nextval or
// pg_sequence_last_value, which take a name as text.
func QuoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
