/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controllers

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
		if c.Type == outboxv1.ConditionProgressing {
			continue // rollouts already produce Deployment events
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
// object changed since it was fetched; that change queues another reconcile, which
// writes the status then.
func patchStatusIfChanged[S any, PS conditionedStatus[S]](ctx context.Context, c client.Client, rec events.EventRecorder,
	obj client.Object, live, desired PS) error {
	if equality.Semantic.DeepEqual(live, desired) {
		return nil
	}
	before := live.GetConditions()
	*live = *desired
	if err := c.Status().Update(ctx, obj, client.FieldOwner(FieldOwner)); err != nil {
		if apierrors.IsConflict(err) {
			logf.FromContext(ctx).V(1).Info("status update conflict; the next reconcile writes it")
			return nil
		}
		return fmt.Errorf("update status: %w", err)
	}
	emitTransitions(rec, obj, before, desired.GetConditions())
	return nil
}
