package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/replslot"
)

func TestPlanSlot(t *testing.T) {
	table := pgident.Table{Schema: "public", Name: "outbox_b"}
	had := &outboxv1.ReplicationStatus{Exists: true}
	ours := []string{"public.outbox_b"}
	streamed := replslot.Slot{Active: true, WALStatus: "reserved"}
	idle := replslot.Slot{WALStatus: "reserved"}
	for _, tc := range []struct {
		name string
		prev *outboxv1.ReplicationStatus
		seen slotSeen
		want slotPlan
	}{
		{"first pass makes slot and publication, no replacement", nil, slotSeen{}, slotPlan{ensure: true}},
		{"a slot not made yet is no replacement", &outboxv1.ReplicationStatus{}, slotSeen{}, slotPlan{ensure: true}},
		{"a slot the pipeline had is gone", had, slotSeen{pubFound: true, tables: ours},
			slotPlan{ensure: true, replacing: outboxv1.ReasonSlotMissing}},
		{"slot and publication gone", had, slotSeen{}, slotPlan{ensure: true, replacing: outboxv1.ReasonSlotMissing}},
		{"invalidated", had, slotSeen{found: true, slot: replslot.Slot{WALStatus: "lost"}, pubFound: true, tables: ours},
			slotPlan{ensure: true, replacing: outboxv1.ReasonSlotInvalidated}},
		{"invalidated while its walsender still ends: next pass", had,
			slotSeen{found: true, slot: replslot.Slot{Active: true, WALStatus: "lost"}, pubFound: true, tables: ours}, slotPlan{}},
		{"a streamed slot is left alone", had, slotSeen{found: true, slot: streamed, pubFound: true, tables: ours}, slotPlan{}},
		{"an idle healthy slot is left alone", had, slotSeen{found: true, slot: idle, pubFound: true, tables: ours}, slotPlan{}},
		{"publication missing, no reader: make it", had, slotSeen{found: true, slot: idle}, slotPlan{ensure: true}},
		{"publication missing under a reader: after it stopped", had, slotSeen{found: true, slot: streamed}, slotPlan{}},
		{"table changed: move the publication, keep the slot", had,
			slotSeen{found: true, slot: streamed, pubFound: true, tables: []string{"public.outbox_a"}}, slotPlan{moveTo: true}},
		{"schema changed", had,
			slotSeen{found: true, slot: idle, pubFound: true, tables: []string{"billing.outbox_b"}}, slotPlan{moveTo: true}},
		{"publication covers ours and another", had,
			slotSeen{found: true, slot: idle, pubFound: true, tables: []string{"public.other", "public.outbox_b"}}, slotPlan{moveTo: true}},
		{"publication covers nothing", had, slotSeen{found: true, slot: idle, pubFound: true}, slotPlan{moveTo: true}},
		{"slot gone and table changed", had, slotSeen{pubFound: true, tables: []string{"public.outbox_a"}},
			slotPlan{ensure: true, replacing: outboxv1.ReasonSlotMissing, moveTo: true}},
	} {
		if got := planSlot(tc.prev, tc.seen, table); got != tc.want {
			t.Errorf("%s: planSlot = %+v, want %+v", tc.name, got, tc.want)
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
