package shardrelay

import (
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardstore"
)

// A batch is full when its events and sentinel rows reach the batch size; a shorter
// one read every window to its end, so the next turn ticks before it reads.
func TestFull(t *testing.T) {
	batch := func(events, windows int) shardstore.Batch {
		return shardstore.Batch{Events: make([]shardstore.Event, events), Windows: make([]shardstore.Window, windows)}
	}
	for _, c := range []struct {
		name    string
		b       shardstore.Batch
		size    int
		want    bool
		comment string
	}{
		{"nothing", batch(0, 0), 500, false, "caught up"},
		{"a trickle", batch(12, 9), 500, false, "every window read to its end"},
		{"events fill it", batch(500, 3), 500, true, "more to read"},
		{"sentinels count", batch(499, 1), 500, true, "the read's LIMIT counts the sentinel row"},
		{"one short", batch(498, 1), 500, false, "the LIMIT was not reached"},
	} {
		if got := full(c.b, c.size); got != c.want {
			t.Errorf("%s: full = %v, want %v (%s)", c.name, got, c.want, c.comment)
		}
	}
}
