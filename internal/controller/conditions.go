/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// Conditions, their Events, and the one status write of a pass. Condition reasons
// are API: api/v1alpha1/condition_reasons.go.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/redact"
)

// maxConditionMessage bounds a condition's message: enough for any message the
// operator writes, and error text quoted into one cannot bloat the object.
const maxConditionMessage = 1000

// setCondition sets a condition in conds for generation gen. The transition time only
// moves when the status changes (meta.SetStatusCondition); the Events for changes
// are emitted by patchStatusIfChanged, once the status is written.
func setCondition(conds *[]metav1.Condition, gen int64, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: typ, Status: status, Reason: reason, ObservedGeneration: gen,
		Message: redact.Truncate(msg, maxConditionMessage),
	})
}

// stalledReasons are the Ready=False reasons no amount of waiting fixes: a user must
// create or fix something, or the replay has ended badly.
var stalledReasons = map[string]bool{
	outboxv1.ReasonSecretNotFound: true, outboxv1.ReasonSecretKeyNotFound: true, outboxv1.ReasonSecretForbidden: true,
	outboxv1.ReasonInvalidSpec: true, outboxv1.ReasonNameConflict: true, outboxv1.ReasonTableMissing: true,
	outboxv1.ReasonPipelineNotFound: true, outboxv1.ReasonJobFailed: true, outboxv1.ReasonJobMissing: true,
	outboxv1.ReasonNoConsumer: true, outboxv1.ReasonPostgresVersionUnsupported: true,
}

// setKstatusConditions derives the kstatus conditions from Ready and the caller's
// reconciling (with its reason and message): Stalled while Ready is False for a
// stalled reason (except selfHealing, a reason the resource fixes by itself here),
// Reconciling while reconciling. Both are removed when not True, as kstatus
// recommends for abnormal-true conditions.
func setKstatusConditions(conds *[]metav1.Condition, gen int64, reconciling bool, reason, msg, selfHealing string) {
	ready := meta.FindStatusCondition(*conds, outboxv1.ConditionReady)
	if ready != nil && ready.Status == metav1.ConditionFalse && stalledReasons[ready.Reason] && ready.Reason != selfHealing {
		setCondition(conds, gen, outboxv1.ConditionStalled, metav1.ConditionTrue, ready.Reason, ready.Message)
	} else {
		meta.RemoveStatusCondition(conds, outboxv1.ConditionStalled)
	}
	if reconciling && meta.FindStatusCondition(*conds, outboxv1.ConditionStalled) == nil { // kstatus reads Reconciling first
		setCondition(conds, gen, outboxv1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
	} else {
		meta.RemoveStatusCondition(conds, outboxv1.ConditionReconciling)
	}
}

// emitTransitions records an Event for every condition whose status or reason changed.
// Ready=True and recoveries are Normal; anything not ready or degraded is a Warning.
func emitTransitions(rec events.EventRecorder, obj runtime.Object, before, after []metav1.Condition) {
	if rec == nil {
		return
	}
	for _, c := range after {
		old := meta.FindStatusCondition(before, c.Type)
		if old != nil && old.Status == c.Status && old.Reason == c.Reason {
			continue
		}
		if old == nil && c.Type != outboxv1.ConditionReady && c.Status == metav1.ConditionFalse {
			continue // "not degraded/not progressing" on creation is no news
		}
		if c.Type == outboxv1.ConditionProgressing || c.Type == outboxv1.ConditionReconciling || c.Type == outboxv1.ConditionStalled {
			continue // rollouts produce Deployment events; the kstatus pair repeats Ready
		}
		if c.Type == outboxv1.ConditionSlotReplaced {
			continue // the replacement itself sent a Warning (SlotReplaced)
		}
		typ := corev1.EventTypeNormal
		if (c.Type == outboxv1.ConditionReady && c.Status == metav1.ConditionFalse) ||
			(c.Type == outboxv1.ConditionDegraded && c.Status == metav1.ConditionTrue) {
			typ = corev1.EventTypeWarning
		}
		rec.Eventf(obj, nil, typ, c.Reason, c.Type, "%s=%s: %s", c.Type, c.Status, c.Message)
	}
}

// conditionedStatus is a status type (used through its pointer) that has conditions.
type conditionedStatus[S any] interface {
	*S
	GetConditions() []metav1.Condition
}

// patchStatusIfChanged writes desired into obj's status subresource when it differs from
// live (a pointer to obj's status as fetched), then records an Event for every condition
// transition. Skipping unchanged writes keeps a steady state free of API traffic and of
// resourceVersion churn that would wake watchers.
//
// The whole status is sent (an update, not a JSON merge patch computed from two Go
// structs): counts that are 0 in both the fetched and the desired struct would be left
// out of such a patch and never show up as 0 in `kubectl get`. A conflict means the
// object changed since it was fetched: the pass is requeued, so the status is written
// from the newer object (a change of status alone queues nothing: the controllers
// watch generation changes, and a finished replay has nothing else to wake it).
// result is the pass's own result, returned when the write went through.
func patchStatusIfChanged[S any, PS conditionedStatus[S]](ctx context.Context, c client.Client, rec events.EventRecorder,
	obj client.Object, live, desired PS, result ctrl.Result) (ctrl.Result, error) {
	if stopped(ctx) {
		return ctrl.Result{}, nil // what a cancelled pass saw is not written (stop.go)
	}
	if equality.Semantic.DeepEqual(live, desired) {
		return result, nil
	}
	before := live.GetConditions()
	*live = *desired
	if err := c.Status().Update(ctx, obj, client.FieldOwner(FieldOwner)); err != nil {
		if apierrors.IsConflict(err) {
			logf.FromContext(ctx).V(1).Info("status update conflict; requeued to write it from the newer object")
			return ctrl.Result{Requeue: true}, nil
		}
		return ctrl.Result{}, fmt.Errorf("update status: %w", err)
	}
	emitTransitions(rec, obj, before, desired.GetConditions())
	return result, nil
}
