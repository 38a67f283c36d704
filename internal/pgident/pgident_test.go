package pgident

import (
	"strings"
	"testing"
)

func TestNewTable(t *testing.T) {
	cases := []struct {
		schema, name string
		wantErr      string
	}{
		{"public", "outbox_event", ""},
		{"app_1", "_t", ""},
		{"", "outbox_event", "schema name is empty"},
		{"public", "", "table name is empty"},
		{"public", "Outbox", "not a valid identifier"},
		{"public", "outbox; drop table x", "not a valid identifier"},
		{"public", `a"b`, "not a valid identifier"},
		{"public", "1abc", "not a valid identifier"},
		{"public", strings.Repeat("a", 51), "too long"},
		{strings.Repeat("s", 64), "t", "longer than 63"},
	}
	for _, c := range cases {
		_, err := NewTable(c.schema, c.name)
		if c.wantErr == "" {
			if err != nil {
				t.Errorf("NewTable(%q,%q) = %v, want ok", c.schema, c.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("NewTable(%q,%q) = %v, want error containing %q", c.schema, c.name, err, c.wantErr)
		}
	}
}

func TestQuoting(t *testing.T) {
	tb := Table{Schema: "public", Name: "outbox_event"}
	if got := tb.Qualified(); got != `"public"."outbox_event"` {
		t.Fatalf("Qualified = %s", got)
	}
	if got := tb.WithSuffix("_archive").Qualified(); got != `"public"."outbox_event_archive"` {
		t.Fatalf("WithSuffix = %s", got)
	}
	if got := Quote(`we"ird`); got != `"we""ird"` {
		t.Fatalf("Quote = %s", got)
	}
}

func TestQuoteLiteral(t *testing.T) {
	for in, want := range map[string]string{
		`"public"."outbox_seq"`: `'"public"."outbox_seq"'`,
		`o'brien`:               `'o''brien'`,
		``:                      `''`,
	} {
		if got := QuoteLiteral(in); got != want {
			t.Errorf("QuoteLiteral(%q) = %s, want %s", in, got, want)
		}
	}
}
