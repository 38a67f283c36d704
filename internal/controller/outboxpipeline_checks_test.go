package controller

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

var checkNow = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// healthy is a pass of a LogicalReplication pipeline that finds nothing wrong: two
// ready workers, a fresh slot, nothing waiting. Each case changes one thing.
func healthy(mut ...func(*pipelineHealth)) pipelineHealth {
	p := testPipeline(func(p *outboxv1.OutboxPipeline) {
		p.Spec.Source.Mode = outboxv1.SourceLogicalReplication
		lag := resource.MustParse("1Ki")
		p.Spec.Source.MaxSlotLag = &lag
	})
	h := pipelineHealth{p: p, table: pgident.Table{Schema: "public", Name: "outbox_event"}, deployment: "orders-relay", now: checkNow,
		st: &outboxv1.OutboxPipelineStatus{Replicas: 2, ReadyWorkers: 2, Replication: &outboxv1.ReplicationStatus{
			Slot: "s", Publication: "s", Exists: true, WALStatus: "reserved", PublicationTable: "public.outbox_event", LagBytes: 10,
		}}}
	for _, m := range mut {
		m(&h)
	}
	return h
}

func at(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }

// Each check alone: the problem it finds (reason and a part of the message), and none
// on the healthy pass or just inside its threshold.
func TestPipelineChecks(t *testing.T) {
	for _, tc := range []struct {
		name      string
		check     check
		h         pipelineHealth
		reason    string
		inMessage string
	}{
		{"database: healthy", databaseProblem, healthy(), "", ""},
		{"database: unreadable", databaseProblem, healthy(func(h *pipelineHealth) {
			h.dbProblem = &refProblem{outboxv1.ReasonTableMissing, "relation does not exist"}
		}), outboxv1.ReasonTableMissing, "relation does not exist"},

		{"paused: no", paused, healthy(), "", ""},
		{"paused: yes", paused, healthy(func(h *pipelineHealth) { h.p.Spec.Paused = true }), outboxv1.ReasonPaused, "spec.paused"},

		{"workers: ready", noWorkerReady, healthy(), "", ""},
		{"workers: one of two", noWorkerReady, healthy(func(h *pipelineHealth) { h.st.ReadyWorkers = 1 }), "", ""},
		{"workers: none wanted", noWorkerReady, healthy(func(h *pipelineHealth) { h.st.Replicas, h.st.ReadyWorkers = 0, 0 }), "", ""},
		{"workers: none ready", noWorkerReady, healthy(func(h *pipelineHealth) { h.st.ReadyWorkers = 0 }),
			outboxv1.ReasonWorkersNotReady, "0/2 relay workers ready; see `kubectl describe deployment orders-relay`"},
		{"workers: none ready, broker down", noWorkerReady, healthy(func(h *pipelineHealth) { h.st.ReadyWorkers, h.st.BrokerUnavailableWorkers = 0, 2 }),
			outboxv1.ReasonWorkersNotReady, "2 report no reachable Kafka broker"},

		{"broker: reachable", brokerOutage, healthy(func(h *pipelineHealth) { h.workers = outboxstats.Workers{Reporting: 2} }), "", ""},
		{"broker: down", brokerOutage, healthy(func(h *pipelineHealth) { h.workers = outboxstats.Workers{Reporting: 2, BrokerDown: 1} }),
			outboxv1.ReasonBrokerUnavailable, "1 of 2 workers cannot write to any Kafka broker"},

		{"slot: healthy", slotProblem, healthy(), "", ""},
		{"slot: Polling pipeline", slotProblem, healthy(func(h *pipelineHealth) {
			h.p.Spec.Source.Mode, h.st.Replication.WALStatus = outboxv1.SourcePolling, "lost"
		}), "", ""},
		{"slot: not made yet", slotProblem, healthy(func(h *pipelineHealth) { h.st.Replication = nil }), "", ""},
		{"slot: missing", slotProblem, healthy(func(h *pipelineHealth) { h.st.Replication.Exists, h.st.Replication.WALStatus = false, "lost" }), "", ""},
		{"slot: invalidated", slotProblem, healthy(func(h *pipelineHealth) { h.st.Replication.WALStatus = "lost" }),
			outboxv1.ReasonSlotInvalidated, "invalidated replication slot s"},
		{"slot: publication on another table", slotProblem, healthy(func(h *pipelineHealth) { h.st.Replication.PublicationTable = "public.old" }),
			outboxv1.ReasonPublicationMismatch, "covers public.old, not spec.source.table public.outbox_event"},
		{"slot: publication not read yet", slotProblem, healthy(func(h *pipelineHealth) { h.st.Replication.PublicationTable = "" }), "", ""},
		{"slot: lag at maxSlotLag", slotProblem, healthy(func(h *pipelineHealth) { h.st.Replication.LagBytes = 1024 }), "", ""},
		{"slot: lag past maxSlotLag", slotProblem, healthy(func(h *pipelineHealth) { h.st.Replication.LagBytes = 1025 }),
			outboxv1.ReasonSlotLagging, "holds 1025 bytes of WAL, more than maxSlotLag 1Ki"},
		{"slot: no maxSlotLag", slotProblem, healthy(func(h *pipelineHealth) { h.p.Spec.Source.MaxSlotLag, h.st.Replication.LagBytes = nil, 1<<40 }), "", ""},

		{"delay: nothing waiting", eventsDelayed, healthy(), "", ""},
		{"delay: at the threshold", eventsDelayed, healthy(func(h *pipelineHealth) {
			h.st.OldestPendingTime = at(checkNow.Add(-outboxv1.DefaultOldestPendingAge))
		}), "", ""},
		{"delay: past the threshold", eventsDelayed, healthy(func(h *pipelineHealth) {
			h.st.OldestPendingTime, h.st.Pending = at(checkNow.Add(-time.Hour)), 7
		}), outboxv1.ReasonEventsDelayed, "waited since 2026-12-01T09:00:00Z (threshold " + outboxv1.DefaultOldestPendingAge.String() + ", 7 pending"},

		{"dead: never grew", deadGrowing, healthy(), "", ""},
		{"dead: grew inside the window", deadGrowing, healthy(func(h *pipelineHealth) {
			h.st.DeadLastIncreaseTime, h.st.Dead = at(checkNow.Add(-time.Minute)), 3
		}), outboxv1.ReasonDeadEventsIncreasing, "3 DEAD events, more than before (last increase 2026-12-01T09:59:00Z)"},
		{"dead: window over", deadGrowing, healthy(func(h *pipelineHealth) {
			h.st.DeadLastIncreaseTime = at(checkNow.Add(-outboxv1.DefaultDeadGrowthWindow))
		}), "", ""},
	} {
		reason, msg := tc.check(tc.h)
		if reason != tc.reason || !strings.Contains(msg, tc.inMessage) || (tc.reason == "") != (msg == "") {
			t.Errorf("%s: %q %q; want %q with %q", tc.name, reason, msg, tc.reason, tc.inMessage)
		}
	}
}

// The lists' order is the priority docs/architecture.md promises: with every problem
// at once, each condition says the first, and the next one once that is fixed.
func TestConditionPriority(t *testing.T) {
	fixes := []func(*pipelineHealth){
		func(h *pipelineHealth) { h.dbProblem = nil },
		func(h *pipelineHealth) { h.p.Spec.Paused = false },
		func(h *pipelineHealth) { h.st.ReadyWorkers = 2 },
		func(h *pipelineHealth) { h.workers = outboxstats.Workers{Reporting: 2} },
		func(h *pipelineHealth) { h.st.Replication.WALStatus = "reserved" },
		func(h *pipelineHealth) { h.st.OldestPendingTime = nil },
		func(h *pipelineHealth) { h.st.DeadLastIncreaseTime = nil },
	}
	h := healthy(func(h *pipelineHealth) {
		h.dbProblem = &refProblem{outboxv1.ReasonDatabaseUnreachable, "connection refused"}
		h.p.Spec.Paused, h.st.ReadyWorkers = true, 0
		h.workers = outboxstats.Workers{Reporting: 2, BrokerDown: 2}
		h.st.Replication.WALStatus = "lost"
		h.st.OldestPendingTime, h.st.DeadLastIncreaseTime = at(checkNow.Add(-time.Hour)), at(checkNow)
	})
	var ready, degraded []string
	for i := 0; i <= len(fixes); i++ {
		if i > 0 {
			fixes[i-1](&h)
		}
		setReady(h)
		setDegraded(h)
		ready = append(ready, meta.FindStatusCondition(h.st.Conditions, outboxv1.ConditionReady).Reason)
		degraded = append(degraded, meta.FindStatusCondition(h.st.Conditions, outboxv1.ConditionDegraded).Reason)
	}

	wantReady := []string{outboxv1.ReasonDatabaseUnreachable, outboxv1.ReasonPaused, outboxv1.ReasonWorkersNotReady,
		outboxv1.ReasonReady, outboxv1.ReasonReady, outboxv1.ReasonReady, outboxv1.ReasonReady, outboxv1.ReasonReady}
	wantDegraded := []string{outboxv1.ReasonDatabaseUnreachable, outboxv1.ReasonBrokerUnavailable, outboxv1.ReasonBrokerUnavailable,
		outboxv1.ReasonBrokerUnavailable, outboxv1.ReasonSlotInvalidated, outboxv1.ReasonEventsDelayed, outboxv1.ReasonDeadEventsIncreasing,
		outboxv1.ReasonHealthy}
	if strings.Join(ready, ",") != strings.Join(wantReady, ",") {
		t.Errorf("Ready reasons as problems are fixed: %v\nwant %v", ready, wantReady)
	}
	if strings.Join(degraded, ",") != strings.Join(wantDegraded, ",") {
		t.Errorf("Degraded reasons as problems are fixed: %v\nwant %v", degraded, wantDegraded)
	}
}
