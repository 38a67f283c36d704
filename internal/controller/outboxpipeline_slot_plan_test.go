package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/replslot"
)

func TestSlotAction(t *testing.T) {
	table := pgident.Table{Schema: "public", Name: "outbox_b"}
	had := &outboxv1.ReplicationStatus{Exists: true}
	ours := []string{"public.outbox_b"}
	streamed := replslot.Slot{Active: true, WALStatus: "reserved"}
	idle := replslot.Slot{WALStatus: "reserved"}
	lost := replslot.Slot{WALStatus: "lost"}
	missing := slotPlan{verb: slotReplace, reason: outboxv1.ReasonSlotMissing, newSlot: true}
	for _, tc := range []struct {
		name    string
		logical bool
		prev    *outboxv1.ReplicationStatus
		seen    replslot.State
		want    slotPlan
	}{
		{"first pass makes slot and publication, no replacement", true, nil, replslot.State{},
			slotPlan{verb: slotCreate, newPublication: true, newSlot: true}},
		{"a slot not made yet is no replacement", true, &outboxv1.ReplicationStatus{}, replslot.State{},
			slotPlan{verb: slotCreate, newPublication: true, newSlot: true}},
		{"a slot the pipeline had is gone", true, had, replslot.State{PublicationFound: true, Tables: ours}, missing},
		{"slot and publication gone", true, had, replslot.State{},
			slotPlan{verb: slotReplace, reason: outboxv1.ReasonSlotMissing, newPublication: true, newSlot: true}},
		{"invalidated", true, had, replslot.State{SlotFound: true, Slot: lost, PublicationFound: true, Tables: ours},
			slotPlan{verb: slotReplace, reason: outboxv1.ReasonSlotInvalidated, dropLost: true, newSlot: true}},
		{"invalidated, publication gone too", true, had, replslot.State{SlotFound: true, Slot: lost},
			slotPlan{verb: slotReplace, reason: outboxv1.ReasonSlotInvalidated, newPublication: true, dropLost: true, newSlot: true}},
		{"invalidated while its walsender still ends: next pass", true, had,
			replslot.State{SlotFound: true, Slot: replslot.Slot{Active: true, WALStatus: "lost"}, PublicationFound: true, Tables: ours}, slotPlan{}},
		{"a streamed slot is left alone", true, had, replslot.State{SlotFound: true, Slot: streamed, PublicationFound: true, Tables: ours}, slotPlan{}},
		{"an idle healthy slot is left alone", true, had, replslot.State{SlotFound: true, Slot: idle, PublicationFound: true, Tables: ours}, slotPlan{}},
		{"publication missing, no reader: make it", true, had, replslot.State{SlotFound: true, Slot: idle},
			slotPlan{verb: slotCreate, newPublication: true}},
		{"publication missing under a reader: after it stopped", true, had, replslot.State{SlotFound: true, Slot: streamed}, slotPlan{}},
		{"table changed: move the publication, keep the slot", true, had,
			replslot.State{SlotFound: true, Slot: streamed, PublicationFound: true, Tables: []string{"public.outbox_a"}}, slotPlan{movePublication: true}},
		{"schema changed", true, had,
			replslot.State{SlotFound: true, Slot: idle, PublicationFound: true, Tables: []string{"billing.outbox_b"}}, slotPlan{movePublication: true}},
		{"publication covers ours and another", true, had,
			replslot.State{SlotFound: true, Slot: idle, PublicationFound: true, Tables: []string{"public.other", "public.outbox_b"}}, slotPlan{movePublication: true}},
		{"publication covers nothing", true, had, replslot.State{SlotFound: true, Slot: idle, PublicationFound: true}, slotPlan{movePublication: true}},
		{"slot gone and table changed", true, had, replslot.State{PublicationFound: true, Tables: []string{"public.outbox_a"}},
			slotPlan{verb: slotReplace, reason: outboxv1.ReasonSlotMissing, movePublication: true, newSlot: true}},
		{"left the mode: drop what the status records", false, had, replslot.State{}, slotPlan{verb: slotDrop}},
		{"left the mode before a slot was made: drop what may be there", false, &outboxv1.ReplicationStatus{}, replslot.State{}, slotPlan{verb: slotDrop}},
		{"never in the mode", false, nil, replslot.State{}, slotPlan{}},
	} {
		if got := slotAction(tc.logical, tc.prev, tc.seen, table); got != tc.want {
			t.Errorf("%s: slotAction = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestSlotReplacedFor(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rs := &outboxv1.ReplicationStatus{LastReplaced: &outboxv1.SlotReplacement{Time: metav1.NewTime(at)}}
	for _, tc := range []struct {
		name string
		rs   *outboxv1.ReplicationStatus
		now  time.Time
		show bool
		left time.Duration
	}{
		{"no replication status", nil, at, false, 0},
		{"never replaced", &outboxv1.ReplicationStatus{}, at, false, 0},
		{"just replaced", rs, at, true, time.Hour},
		{"inside the window", rs, at.Add(59 * time.Minute), true, time.Minute},
		{"window over", rs, at.Add(time.Hour), false, 0},
		{"long ago", rs, at.Add(48 * time.Hour), false, -47 * time.Hour},
	} {
		show, left := slotReplacedFor(tc.rs, tc.now, time.Hour)
		if show != tc.show || (show && left != tc.left) {
			t.Errorf("%s: slotReplacedFor = %t, %s; want %t, %s", tc.name, show, left, tc.show, tc.left)
		}
	}
}
