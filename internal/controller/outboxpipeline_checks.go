/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// The OutboxPipeline's Ready and Degraded conditions as priority lists of checks: the
// first check that finds a problem gives the condition's reason and message, so the
// order of a list is the priority docs/architecture.md ("Conditions and reasons are
// API") promises, and the next reason is one check in one list. Each check is pure
// and tested alone (outboxpipeline_checks_test.go).

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// pipelineHealth is what a pass knows when it sets the conditions.
type pipelineHealth struct {
	p     *outboxv1.OutboxPipeline // with defaults
	st    *outboxv1.OutboxPipelineStatus
	table pgident.Table
	// dbProblem says why the database could not be read, nil when it was.
	dbProblem *refProblem
	// workers are the workers' reports (outboxstats.Stats.Workers).
	workers    outboxstats.Workers
	deployment string // the relay Deployment's name
	now        time.Time
}

// check finds one problem: its reason and message, or "" when there is none.
type check func(h pipelineHealth) (reason, msg string)

// readyChecks: the database first (without it nothing else is known), then a pause,
// then whether any worker is ready.
var readyChecks = []check{databaseProblem, paused, noWorkerReady}

// degradedChecks pick the most explanatory problem: the database first (without it
// nothing else can be read), then a broker outage reported by the workers (it explains
// delayed events), then the slot, then delays and dead events.
var degradedChecks = []check{databaseProblem, brokerOutage, slotProblem, eventsDelayed, deadGrowing}

// firstProblem is the problem of the first check in checks that finds one.
func firstProblem(checks []check, h pipelineHealth) (reason, msg string) {
	for _, c := range checks {
		if reason, msg = c(h); reason != "" {
			return reason, msg
		}
	}
	return "", ""
}

// setReady sets Ready: False for the first of readyChecks' problems, else True.
func setReady(h pipelineHealth) {
	setFromChecks(h, outboxv1.ConditionReady, readyChecks, metav1.ConditionFalse, metav1.ConditionTrue, outboxv1.ReasonReady,
		fmt.Sprintf("%d/%d relay workers ready, database reachable", h.st.ReadyWorkers, h.st.Replicas))
}

// setDegraded sets Degraded: True for the first of degradedChecks' problems, else
// False (Healthy).
func setDegraded(h pipelineHealth) {
	setFromChecks(h, outboxv1.ConditionDegraded, degradedChecks, metav1.ConditionTrue, metav1.ConditionFalse, outboxv1.ReasonHealthy,
		fmt.Sprintf("database reachable; %d pending, %d retrying, %d dead", h.st.Pending, h.st.Retrying, h.st.Dead))
}

// setFromChecks sets condition typ: status problem with the first problem checks
// find, else status ok with okReason and okMsg.
func setFromChecks(h pipelineHealth, typ string, checks []check, problem, ok metav1.ConditionStatus, okReason, okMsg string) {
	conds, gen := &h.st.Conditions, h.p.Generation
	if reason, msg := firstProblem(checks, h); reason != "" {
		setCondition(conds, gen, typ, problem, reason, msg)
		return
	}
	setCondition(conds, gen, typ, ok, okReason, okMsg)
}

// databaseProblem: the outbox table could not be read.
func databaseProblem(h pipelineHealth) (reason, msg string) {
	if h.dbProblem == nil {
		return "", ""
	}
	return h.dbProblem.Reason, h.dbProblem.Message
}

// paused: spec.paused scales the workers to zero.
func paused(h pipelineHealth) (reason, msg string) {
	if !h.p.Spec.Paused {
		return "", ""
	}
	return outboxv1.ReasonPaused, "spec.paused is true: no workers run, events accumulate as PENDING"
}

// noWorkerReady: workers are wanted and none is ready.
func noWorkerReady(h pipelineHealth) (reason, msg string) {
	st := h.st
	if st.Replicas == 0 || st.ReadyWorkers > 0 {
		return "", ""
	}
	return outboxv1.ReasonWorkersNotReady, fmt.Sprintf("0/%d relay workers ready%s; see `kubectl describe deployment %s` and the pods' logs",
		st.Replicas, brokerHint(st.BrokerUnavailableWorkers), h.deployment)
}

// brokerOutage: a fresh worker reports that it cannot write to any broker
// (outboxpipeline_broker.go).
func brokerOutage(h pipelineHealth) (reason, msg string) {
	if msg = brokerUnavailableMessage(h.workers); msg == "" {
		return "", ""
	}
	return outboxv1.ReasonBrokerUnavailable, msg
}

// slotProblem: the LogicalReplication slot is invalidated, its publication covers
// another table, or it holds more WAL than maxSlotLag.
func slotProblem(h pipelineHealth) (reason, msg string) {
	p, rs := h.p, h.st.Replication
	if !p.Spec.LogicalReplication() || rs == nil || !rs.Exists {
		return "", ""
	}
	if rs.WALStatus == "lost" {
		return outboxv1.ReasonSlotInvalidated, fmt.Sprintf("PostgreSQL invalidated replication slot %s (max_slot_wal_keep_size): polling publishes every event meanwhile, and the relay replaces the slot", rs.Slot)
	}
	if rs.PublicationTable != "" && rs.PublicationTable != h.table.String() {
		return outboxv1.ReasonPublicationMismatch, fmt.Sprintf("publication %s covers %s, not spec.source.table %s, and the operator could not move it (see the PublicationNotMoved event; ALTER PUBLICATION needs ownership of the table): every event waits cdcHandoverAfter for polling",
			rs.Publication, rs.PublicationTable, h.table)
	}
	if max := p.Spec.Source.MaxSlotLag; max != nil && rs.LagBytes > max.Value() {
		return outboxv1.ReasonSlotLagging, fmt.Sprintf("replication slot %s holds %d bytes of WAL, more than maxSlotLag %s (active: %t); check the relay workers and long-running transactions",
			rs.Slot, rs.LagBytes, max.String(), rs.Active)
	}
	return "", ""
}

// eventsDelayed: the oldest unpublished event waited longer than
// oldestPendingAgeThreshold.
func eventsDelayed(h pipelineHealth) (reason, msg string) {
	st, threshold := h.st, h.p.Spec.Monitoring.OldestPendingAgeThreshold.Duration
	if st.OldestPendingTime == nil || h.now.Sub(st.OldestPendingTime.Time) <= threshold {
		return "", ""
	}
	// The time, not the age: an age would change the message, and so write the status
	// and wake every watcher, on every pass.
	return outboxv1.ReasonEventsDelayed, fmt.Sprintf(
		"the oldest unpublished event has waited since %s (threshold %s, %d pending, %d retrying); check the workers' logs, broker health and last_error_code of RETRY rows",
		st.OldestPendingTime.UTC().Format(time.RFC3339), threshold, st.Pending, st.Retrying)
}

// deadGrowing: the DEAD count rose within deadGrowthWindow.
func deadGrowing(h pipelineHealth) (reason, msg string) {
	st := h.st
	if st.DeadLastIncreaseTime == nil || h.now.Sub(st.DeadLastIncreaseTime.Time) >= h.p.Spec.Monitoring.DeadGrowthWindow.Duration {
		return "", ""
	}
	return outboxv1.ReasonDeadEventsIncreasing, fmt.Sprintf(
		"%d DEAD events, more than before (last increase %s); inspect last_error_code, fix the cause, then replay them with a DeadLetterReplay",
		st.Dead, st.DeadLastIncreaseTime.UTC().Format(time.RFC3339))
}
