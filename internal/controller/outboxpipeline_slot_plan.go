/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// What a pass does about a pipeline's slot and publication, decided from what
// observeDatabase read (replslot.State) and the status of the pass before: pure, so
// every case is a table test (outboxpipeline_slot_plan_test.go). reconcileSlot
// executes the plan with replslot, which runs statements and decides nothing.

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/replslot"
)

// DefaultSlotReplacedFor is how long the SlotReplaced condition stays after the
// operator replaced a slot: long enough for whoever looks next (a morning's on-call,
// the next sync) to see it; status.replication.lastReplaced keeps it after that.
const DefaultSlotReplacedFor = time.Hour

// slotVerb is what a pass does to the slot.
type slotVerb int

const (
	slotNone slotVerb = iota
	// slotCreate makes what is missing of a slot the pipeline never had, or of its
	// publication.
	slotCreate
	// slotReplace makes a new slot for one the pipeline had, and records it
	// (status.replication.lastReplaced, SlotReplaced).
	slotReplace
	// slotDrop drops slot and publication: the pipeline left LogicalReplication.
	slotDrop
)

// slotPlan is what the pass does, statement by statement, in this order: move the
// publication, make it, drop the invalidated slot, make the slot.
type slotPlan struct {
	verb slotVerb
	// reason is why a slot is replaced (ReasonSlotMissing, ReasonSlotInvalidated), or "".
	reason string
	// movePublication points the publication at the spec's table.
	movePublication bool
	// newPublication and newSlot make them; dropLost first drops the invalidated slot.
	newPublication, dropLost, newSlot bool
}

// slotAction decides. A pipeline outside LogicalReplication drops the slot it still
// records. In the mode, a slot a worker streams from is left alone (a lost slot has no
// reader: PostgreSQL ends it); a missing publication is made, and one covering another
// table (spec.source.table changed) is moved, reader or not: the walsender follows
// the change without a restart. A missing slot is a replacement only when the pipeline
// had one (prev.Exists); the first slot of a pipeline is no news.
func slotAction(logical bool, prev *outboxv1.ReplicationStatus, seen replslot.State, table pgident.Table) slotPlan {
	if !logical {
		if prev != nil {
			return slotPlan{verb: slotDrop}
		}
		return slotPlan{}
	}
	plan := slotPlan{movePublication: seen.PublicationFound && !replslot.CoversExactly(seen.Tables, table)}
	switch {
	case !seen.SlotFound && prev != nil && prev.Exists:
		plan.verb, plan.reason, plan.newSlot = slotReplace, outboxv1.ReasonSlotMissing, true
	case !seen.SlotFound:
		plan.verb, plan.newSlot = slotCreate, true
	case seen.Slot.Lost() && !seen.Slot.Active:
		plan.verb, plan.reason, plan.dropLost, plan.newSlot = slotReplace, outboxv1.ReasonSlotInvalidated, true, true
	case !seen.PublicationFound && !seen.Slot.Active:
		plan.verb = slotCreate
	}
	plan.newPublication = plan.verb != slotNone && !seen.PublicationFound
	return plan
}

// replacementRecord is what status.replication.lastReplaced says of a replacement.
func replacementRecord(slot, reason string, now time.Time) *outboxv1.SlotReplacement {
	why := "PostgreSQL had invalidated it (max_slot_wal_keep_size: its reader was gone or behind for too long)"
	if reason == outboxv1.ReasonSlotMissing {
		why = "it was gone (dropped outside the operator)"
	}
	return &outboxv1.SlotReplacement{Time: metav1.NewTime(now.Truncate(time.Second)), Reason: reason, Message: fmt.Sprintf(
		"the operator replaced replication slot %s: %s. Nothing is lost: polling publishes what committed meanwhile after cdcHandoverAfter; find out why the slot was lost (relay workers down, paused, stuck)",
		slot, why)}
}

// slotReplacedFor says whether the SlotReplaced condition shows now, and for how much
// longer (the pass requeues then to take it away).
func slotReplacedFor(rs *outboxv1.ReplicationStatus, now time.Time, window time.Duration) (show bool, left time.Duration) {
	if rs == nil || rs.LastReplaced == nil {
		return false, 0
	}
	left = rs.LastReplaced.Time.Add(window).Sub(now)
	return left > 0, left
}
