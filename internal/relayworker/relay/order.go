// order.go: the per-aggregate order guard (docs/worker-contract.md, "Per-aggregate
// order on the partition").

package relay

import (
	"sort"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
)

// orderGuard sorts rows in place into (aggregate, version) order and splits them into
// the rows to publish now and the rows to hand back unsent, as indices into the
// sorted rows (each in that order).
//
// Several versions of one aggregate go out in one batch only when they share
// destination and key: one partition, one produce request, stored or refused as a
// whole in version order. Otherwise only the oldest is published now: a newer version
// whose direct predecessor differs in destination or key is held, and so is every
// later version behind a held one. Only the direct predecessor matters: rows are
// sorted, and a held row holds every later version of its aggregate in turn. Held
// rows are released without an attempt; the claim's own order check (store.ClaimSQL)
// decides when they come back.
func orderGuard(rows []event.Row) (now, held []int) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := &rows[i], &rows[j]
		if a.AggregateType != b.AggregateType {
			return a.AggregateType < b.AggregateType
		}
		if a.AggregateID != b.AggregateID {
			return a.AggregateID < b.AggregateID
		}
		return a.AggregateVersion < b.AggregateVersion
	})
	now = make([]int, 0, len(rows))
	prevHeld := false // rows[i-1] is held, so its successors in the aggregate wait too
	for i := range rows {
		if i > 0 && mustWait(&rows[i-1], &rows[i], prevHeld) {
			held = append(held, i)
			prevHeld = true
			continue
		}
		prevHeld = false
		now = append(now, i)
	}
	return now, held
}

// mustWait reports whether row, the next row after prev in sorted order, waits for a
// later batch: it is a newer version of prev's aggregate, and prev is held or goes
// to another partition (destination or key differ).
func mustWait(prev, row *event.Row, prevHeld bool) bool {
	if prev.AggregateType != row.AggregateType || prev.AggregateID != row.AggregateID {
		return false
	}
	return prevHeld || prev.Destination != row.Destination || prev.MessageKey != row.MessageKey
}
