package cdc

import (
	"reflect"
	"testing"
)

// pgoutput refuses an option it does not know, so "messages" (the heartbeat's logical
// messages) is asked for only from PostgreSQL 14 on; 13 gets the rest unchanged.
func TestPluginArgsByServerVersion(t *testing.T) {
	base := []string{"proto_version '1'", "publication_names 'outbox_pub'"}
	withMessages := append(append([]string{}, base...), "messages 'true'")
	for major, want := range map[int][]string{13: base, 14: withMessages, 15: withMessages, 17: withMessages, 18: withMessages} {
		if got := pluginArgs("outbox_pub", major); !reflect.DeepEqual(got, want) {
			t.Errorf("pluginArgs(%d) = %q, want %q", major, got, want)
		}
	}
}
