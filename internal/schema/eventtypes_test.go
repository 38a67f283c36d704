package schema

import "testing"

// Which payload and headers types the relay sends, and which types an upgrade from v1
// gives the v2 table.
func TestEventTypes(t *testing.T) {
	for _, c := range []struct {
		in       EventTypes
		valid    bool
		upgraded EventTypes
	}{
		{EventTypes{"jsonb", "jsonb"}, true, EventTypes{"json", "json"}},
		{EventTypes{"json", "json"}, true, EventTypes{"json", "json"}},
		{EventTypes{"bytea", "jsonb"}, true, EventTypes{"bytea", "json"}},
		{EventTypes{"text", "text"}, true, EventTypes{"text", "text"}},
		{EventTypes{"xml", "jsonb"}, false, EventTypes{"xml", "json"}},
		{EventTypes{"jsonb", "bytea"}, false, EventTypes{"json", "bytea"}},
		{EventTypes{"", ""}, false, EventTypes{"", ""}},
	} {
		if err := c.in.Valid(); (err == nil) != c.valid {
			t.Errorf("%+v.Valid() = %v, want valid %v", c.in, err, c.valid)
		}
		if got := c.in.upgraded(); got != c.upgraded {
			t.Errorf("%+v.upgraded() = %+v, want %+v", c.in, got, c.upgraded)
		}
	}
	if err := NewTableEventTypes.Valid(); err != nil {
		t.Fatal(err)
	}
}
