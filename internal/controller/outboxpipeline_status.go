/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// The OutboxPipeline's status: what the workers' Deployment and the outbox table say,
// and the Progressing, kstatus and SlotReplaced conditions made from it. Ready and
// Degraded are priority lists of checks (outboxpipeline_checks.go); the broker
// messages are in outboxpipeline_broker.go.

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
)

// setNotReady reports a problem that stopped the pass before the children were applied.
func setNotReady(st *outboxv1.OutboxPipelineStatus, gen int64, problem *refProblem) {
	setCondition(&st.Conditions, gen, outboxv1.ConditionReady, metav1.ConditionFalse, problem.Reason, problem.Message)
	setCondition(&st.Conditions, gen, outboxv1.ConditionDegraded, metav1.ConditionTrue, problem.Reason, problem.Message)
	if meta.FindStatusCondition(st.Conditions, outboxv1.ConditionProgressing) == nil {
		setCondition(&st.Conditions, gen, outboxv1.ConditionProgressing, metav1.ConditionFalse, problem.Reason, "waiting for the problem to be fixed")
	}
}

// observeWorkers copies the workers' counts from the applied Deployment and sets
// Progressing while the Deployment controller has not caught up with the template.
func observeWorkers(p *outboxv1.OutboxPipeline, dep *appsv1.Deployment, st *outboxv1.OutboxPipelineStatus) {
	st.DeploymentName = dep.Name
	st.Replicas = *dep.Spec.Replicas
	st.ReadyWorkers = dep.Status.ReadyReplicas
	st.Workers = fmt.Sprintf("%d/%d", st.ReadyWorkers, st.Replicas)
	rolling := dep.Status.ObservedGeneration < dep.Generation ||
		dep.Status.UpdatedReplicas < st.Replicas || dep.Status.Replicas > dep.Status.UpdatedReplicas
	if rolling {
		setCondition(&st.Conditions, p.Generation, outboxv1.ConditionProgressing, metav1.ConditionTrue, outboxv1.ReasonRollingOut,
			fmt.Sprintf("rolling out Deployment %s: %d of %d workers updated", dep.Name, dep.Status.UpdatedReplicas, st.Replicas))
		return
	}
	setCondition(&st.Conditions, p.Generation, outboxv1.ConditionProgressing, metav1.ConditionFalse, outboxv1.ReasonRolloutComplete,
		fmt.Sprintf("Deployment %s is up to date", dep.Name))
}

// recordStats copies a snapshot into st. lastCheckTime moves only when a value changed
// (or on the first read): an idle pipeline's status is never rewritten, even to say it
// was read. How recent the last read is, the manager says with the metric
// outbox_pipeline_status_read_timestamp_seconds instead; a failed read changes the
// conditions.
func recordStats(st *outboxv1.OutboxPipelineStatus, s outboxstats.Stats, now time.Time) {
	prev := *st
	if st.LastCheckTime != nil && s.Dead > st.Dead {
		st.DeadLastIncreaseTime = &metav1.Time{Time: now}
	}
	st.Pending, st.Sending, st.Retrying = s.Pending, s.Sending, s.Retrying
	st.ExpiredLeases, st.Dead = s.ExpiredLeases, s.Dead
	st.OldestPendingTime = timePtr(s.OldestPending)
	st.LastPublishTime = timePtr(s.LastPublish)
	st.BrokerUnavailableWorkers = s.Workers.BrokerDown
	st.BrokerUnavailableSince = timePtr(s.Workers.BrokerDownSince)
	changed := prev.Pending != st.Pending || prev.Sending != st.Sending || prev.Retrying != st.Retrying ||
		prev.ExpiredLeases != st.ExpiredLeases || prev.Dead != st.Dead ||
		prev.BrokerUnavailableWorkers != st.BrokerUnavailableWorkers ||
		!equality.Semantic.DeepEqual(prev.OldestPendingTime, st.OldestPendingTime) ||
		!equality.Semantic.DeepEqual(prev.LastPublishTime, st.LastPublishTime) ||
		!equality.Semantic.DeepEqual(prev.BrokerUnavailableSince, st.BrokerUnavailableSince)
	if changed || st.LastCheckTime == nil {
		st.LastCheckTime = &metav1.Time{Time: now}
	}
}

// timePtr is nil for the zero time.
func timePtr(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	// The API stores seconds; compare like with like so an unchanged value is unchanged.
	mt := metav1.NewTime(t.Truncate(time.Second))
	return &mt
}

// setPipelineKstatus: a pipeline is Reconciling while its Progressing condition is
// True (a rollout that old workers still serve), with Progressing's reason. A missing
// table is not Stalled when the pipeline migrates it itself: the migrate init
// container creates it as the pods start.
func setPipelineKstatus(st *outboxv1.OutboxPipelineStatus, gen int64, migrates bool) {
	progressing := meta.FindStatusCondition(st.Conditions, outboxv1.ConditionProgressing)
	rolling := progressing != nil && progressing.Status == metav1.ConditionTrue
	reason, msg := "", ""
	if rolling {
		reason, msg = progressing.Reason, progressing.Message
	}
	selfHealing := ""
	if migrates {
		selfHealing = outboxv1.ReasonTableMissing
	}
	setKstatusConditions(&st.Conditions, gen, rolling, reason, msg, selfHealing)
}

// setSlotReplaced shows SlotReplaced while the newest slot replacement is inside its
// window, and removes it after (it is present only while True, like the kstatus pair),
// requeueing the pass for the moment it goes. It touches neither Ready nor Degraded:
// the pipeline works again, polling covered the gap, and a GitOps tool should not
// report a healed pipeline as unhealthy (docs/argocd-health.md).
func (r *OutboxPipelineReconciler) setSlotReplaced(st *outboxv1.OutboxPipelineStatus, gen int64, result ctrl.Result) ctrl.Result {
	window := r.SlotReplacedFor
	if window <= 0 {
		window = DefaultSlotReplacedFor
	}
	show, left := slotReplacedFor(st.Replication, r.now(), window)
	if !show {
		meta.RemoveStatusCondition(&st.Conditions, outboxv1.ConditionSlotReplaced)
		return result
	}
	rec := st.Replication.LastReplaced
	setCondition(&st.Conditions, gen, outboxv1.ConditionSlotReplaced, metav1.ConditionTrue, rec.Reason,
		fmt.Sprintf("at %s %s", rec.Time.UTC().Format(time.RFC3339), rec.Message))
	if result.RequeueAfter == 0 || left < result.RequeueAfter {
		result.RequeueAfter = left
	}
	return result
}
