/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controllers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// Condition reasons are API: api/v1alpha1/condition_reasons.go.

// FieldOwner identifies the operator's writes.
const FieldOwner = "outbox-operator"

// CacheByObject limits the manager's informers for owned kinds to objects the operator
// manages, so it never caches every Deployment, Service or Job of the cluster. Secrets
// are never cached at all: they are read one by one with an uncached reader.
func CacheByObject() map[client.Object]cache.ByObject {
	managed := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy})}
	return map[client.Object]cache.ByObject{
		&appsv1.Deployment{}:            managed,
		&corev1.Service{}:               managed,
		&corev1.ServiceAccount{}:        managed,
		&policyv1.PodDisruptionBudget{}: managed,
		&batchv1.Job{}:                  managed,
		&batchv1.CronJob{}:              managed,
	}
}

// refProblem is a user-fixable problem with a reference; it becomes a condition.
type refProblem struct {
	Reason  string
	Message string
}

func (p *refProblem) Error() string { return p.Reason + ": " + p.Message }

// readSecretRefs fetches every referenced Secret key from the object's OWN namespace
// with the uncached reader (no cluster-wide Secret informer). A missing Secret or key
// is a refProblem; other API errors are returned as errors.
func readSecretRefs(ctx context.Context, reader client.Reader, namespace string, refs []NamedRef) (SecretValues, *refProblem, error) {
	secrets := map[string]*corev1.Secret{}
	values := SecretValues{Data: map[outboxv1.SecretKeyRef][]byte{}, UIDs: map[string]string{}}
	for _, nr := range refs {
		s, ok := secrets[nr.Ref.Name]
		if !ok {
			s = &corev1.Secret{}
			err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: nr.Ref.Name}, s)
			switch {
			case apierrors.IsNotFound(err):
				return values, &refProblem{outboxv1.ReasonSecretNotFound, fmt.Sprintf(
					"Secret %q referenced by %s was not found in namespace %q; create it there (Secrets of other namespaces cannot be referenced)",
					nr.Ref.Name, nr.Path, namespace)}, nil
			case apierrors.IsForbidden(err):
				return values, &refProblem{outboxv1.ReasonSecretForbidden, fmt.Sprintf(
					"the operator may not read Secret %q referenced by %s in namespace %q; check the operator's RBAC",
					nr.Ref.Name, nr.Path, namespace)}, nil
			case err != nil:
				return values, nil, fmt.Errorf("get Secret %s/%s: %w", namespace, nr.Ref.Name, err)
			}
			secrets[nr.Ref.Name] = s
			values.UIDs[nr.Ref.Name] = string(s.UID)
		}
		v, ok := s.Data[nr.Ref.Key]
		if !ok || len(v) == 0 {
			keys := make([]string, 0, len(s.Data))
			for k := range s.Data {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			what := "has no key"
			if ok {
				what = "has an empty key"
			}
			return values, &refProblem{outboxv1.ReasonSecretKeyNotFound, fmt.Sprintf(
				"Secret %q %s %q (referenced by %s); keys present: [%s]",
				nr.Ref.Name, what, nr.Ref.Key, nr.Path, strings.Join(keys, ", "))}, nil
		}
		values.Data[nr.Ref] = v
	}
	return values, nil, nil
}

// ensureOwned creates desired, or updates existing to it when the fingerprint of what
// the operator wants (hashParts) changed. copySpec copies the operator-owned fields
// from desired into existing (keeping server-assigned ones such as a ClusterIP).
// existing is filled with the live object.
func ensureOwned[T client.Object](ctx context.Context, c client.Client, scheme *runtime.Scheme, owner client.Object,
	desired, existing T, hashParts any, copySpec func(dst, src T)) error {
	hash := desiredHash(desired.GetLabels(), desired.GetAnnotations(), hashParts)
	ann := desired.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationDesiredHash] = hash
	desired.SetAnnotations(ann)
	if err := controllerutil.SetControllerReference(owner, desired, scheme); err != nil {
		return err
	}
	kind := fmt.Sprintf("%T", desired)
	kind = kind[strings.LastIndex(kind, ".")+1:]

	err := c.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	if apierrors.IsNotFound(err) {
		if err := c.Create(ctx, desired, client.FieldOwner(FieldOwner)); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return &refProblem{outboxv1.ReasonNameConflict, fmt.Sprintf(
					"a %s named %q already exists in namespace %q and is not managed by outbox-operator; delete or rename it",
					kind, desired.GetName(), desired.GetNamespace())}
			}
			return fmt.Errorf("create %s %s: %w", kind, desired.GetName(), err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s %s: %w", kind, desired.GetName(), err)
	}
	if ref := metav1.GetControllerOf(existing); ref == nil || ref.UID != owner.GetUID() {
		return &refProblem{outboxv1.ReasonNameConflict, fmt.Sprintf(
			"%s %q in namespace %q is controlled by something else; delete or rename it",
			kind, desired.GetName(), desired.GetNamespace())}
	}
	if existing.GetAnnotations()[AnnotationDesiredHash] == hash {
		return nil
	}
	l := existing.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	for k, v := range desired.GetLabels() {
		l[k] = v
	}
	existing.SetLabels(l)
	a := existing.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	for k, v := range desired.GetAnnotations() {
		a[k] = v
	}
	existing.SetAnnotations(a)
	existing.SetOwnerReferences(desired.GetOwnerReferences())
	copySpec(existing, desired)
	if err := c.Update(ctx, existing, client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("update %s %s: %w", kind, desired.GetName(), err)
	}
	return nil
}

// setCondition sets a condition and reports whether its status or reason changed.
func setCondition(conds *[]metav1.Condition, gen int64, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: truncate(msg, 1000), ObservedGeneration: gen,
	})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
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
		typ := corev1.EventTypeNormal
		if (c.Type == outboxv1.ConditionReady && c.Status == metav1.ConditionFalse) ||
			(c.Type == outboxv1.ConditionDegraded && c.Status == metav1.ConditionTrue) {
			typ = corev1.EventTypeWarning
		}
		if c.Type == outboxv1.ConditionProgressing {
			continue // rollouts already produce Deployment events
		}
		rec.Eventf(obj, nil, typ, c.Reason, c.Type, "%s=%s: %s", c.Type, c.Status, c.Message)
	}
}

// requeueBackoff grows the retry delay for a problem only a human can fix, so a missing
// reference is rechecked without a hot loop: 10s, 20s, 40s ... capped at 5 minutes,
// counted from when the condition first appeared.
func requeueBackoff(since time.Time, now time.Time) time.Duration {
	d := 10 * time.Second
	for elapsed := now.Sub(since); elapsed > d && d < 5*time.Minute; {
		d *= 2
	}
	if d > 5*time.Minute {
		d = 5 * time.Minute
	}
	return d
}

// The shared ends of every Reconcile: turning a user-fixable problem into a condition,
// and writing the status once. Each reconciler's Reconcile is then fetch -> work ->
// settle problems -> write status, and the three kinds cannot drift apart.

// asRefProblem splits a non-nil phase error: a *refProblem (a user-fixable problem that
// belongs in the status) is returned first; anything else comes back as the error, for
// controller-runtime's own retry with backoff.
func asRefProblem(err error) (*refProblem, error) {
	var problem *refProblem
	if errors.As(err, &problem) {
		return problem, nil
	}
	return nil, err
}

// resultForRefProblem settles a non-nil phase error of a kind whose only condition about
// references is Ready: a *refProblem becomes Ready=False with its reason and message, and
// a requeue that backs off while the same reason persists (only a human can fix it, so
// hot-looping helps no one). Other errors are returned unchanged.
func resultForRefProblem(err error, conds *[]metav1.Condition, gen int64) (ctrl.Result, error) {
	problem, err := asRefProblem(err)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := time.Now()
	since := now
	if c := meta.FindStatusCondition(*conds, outboxv1.ConditionReady); c != nil && c.Reason == problem.Reason {
		since = c.LastTransitionTime.Time
	}
	setCondition(conds, gen, outboxv1.ConditionReady, metav1.ConditionFalse, problem.Reason, problem.Message)
	return ctrl.Result{RequeueAfter: requeueBackoff(since, now)}, nil
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
