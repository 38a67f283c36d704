/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controllers

// What a pass does about a LogicalReplication pipeline's slot and publication, decided
// from what it read (slotSeen) and the status of the pass before: pure, so every case
// is a table test (outboxpipeline_slot_plan_test.go). observeSlot reads and executes.

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

// slotSeen is what one pass read of the slot and its publication.
type slotSeen struct {
	found bool
	slot  replslot.Slot
	// pubFound is false while the publication is missing; tables are what it covers.
	pubFound bool
	tables   []string
}

// slotPlan is what the pass does.
type slotPlan struct {
	// ensure makes what is missing and replaces a lost slot (replslot.Ensure).
	ensure bool
	// replacing is the reason to record when ensure makes a new slot for one the
	// pipeline had (ReasonSlotInvalidated, ReasonSlotMissing), or "".
	replacing string
	// moveTo is set when the publication must move to the spec's table.
	moveTo bool
}

// planSlot decides. A slot a worker streams from is left alone (a lost slot has no
// reader: PostgreSQL ends it); a missing publication is made, and one covering another
// table (spec.source.table changed) is moved, reader or not: the walsender follows
// the change without a restart. A missing slot is a replacement only when the pipeline
// had one (prev.Exists); the first slot of a pipeline is no news.
func planSlot(prev *outboxv1.ReplicationStatus, seen slotSeen, table pgident.Table) slotPlan {
	var plan slotPlan
	switch {
	case !seen.found:
		plan.ensure = true
		if prev != nil && prev.Exists {
			plan.replacing = outboxv1.ReasonSlotMissing
		}
	case seen.slot.WALStatus == "lost" && !seen.slot.Active:
		plan.ensure, plan.replacing = true, outboxv1.ReasonSlotInvalidated
	case !seen.pubFound && !seen.slot.Active:
		plan.ensure = true
	}
	plan.moveTo = seen.pubFound && !replslot.CoversExactly(seen.tables, table)
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
