package relay

import (
	"strings"
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
)

// row is an event of aggregate agg (type "T") at version v, to topic dest with key.
func row(id, agg string, v int64, dest, key string) event.Row {
	return event.Row{EventID: id, AggregateType: "T", AggregateID: agg, AggregateVersion: v, Destination: dest, MessageKey: key}
}

func TestOrderGuard(t *testing.T) {
	for _, c := range []struct {
		name      string
		rows      []event.Row
		now, held string // event ids in sorted order
	}{
		{"empty batch", nil, "", ""},
		{"one aggregate, one partition: all versions together",
			[]event.Row{row("a1", "a", 1, "t", "a"), row("a2", "a", 2, "t", "a"), row("a3", "a", 3, "t", "a")},
			"a1 a2 a3", ""},
		{"claimed out of order: published in version order",
			[]event.Row{row("a3", "a", 3, "t", "a"), row("b1", "b", 1, "t", "b"), row("a1", "a", 1, "t", "a"), row("a2", "a", 2, "t", "a")},
			"a1 a2 a3 b1", ""},
		{"newer version to another topic waits",
			[]event.Row{row("a1", "a", 1, "t", "a"), row("a2", "a", 2, "u", "a")},
			"a1", "a2"},
		{"newer version with another key waits",
			[]event.Row{row("a1", "a", 1, "t", "a"), row("a2", "a", 2, "t", "other")},
			"a1", "a2"},
		{"everything behind a held version waits, even on the first partition",
			[]event.Row{row("a1", "a", 1, "t", "a"), row("a2", "a", 2, "u", "a"), row("a3", "a", 3, "t", "a"), row("a4", "a", 4, "t", "a")},
			"a1", "a2 a3 a4"},
		{"a held aggregate does not hold the next aggregate",
			[]event.Row{row("a1", "a", 1, "t", "a"), row("a2", "a", 2, "u", "a"), row("b1", "b", 1, "u", "b"), row("b2", "b", 2, "u", "b")},
			"a1 b1 b2", "a2"},
		{"same id in another aggregate type is another aggregate",
			[]event.Row{row("a1", "a", 1, "t", "a"), {EventID: "x1", AggregateType: "U", AggregateID: "a", AggregateVersion: 2, Destination: "u", MessageKey: "a"}},
			"a1 x1", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			now, held := orderGuard(c.rows)
			if got := ids(c.rows, now); got != c.now {
				t.Errorf("published now: %q, want %q", got, c.now)
			}
			if got := ids(c.rows, held); got != c.held {
				t.Errorf("held back: %q, want %q", got, c.held)
			}
		})
	}
}

func ids(rows []event.Row, idx []int) string {
	var s []string
	for _, i := range idx {
		s = append(s, rows[i].EventID)
	}
	return strings.Join(s, " ")
}
