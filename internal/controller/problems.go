/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// User-fixable problems. A phase that finds one (a missing Secret or pipeline, an
// invalid spec, a name taken by someone else's object) returns it as a *refProblem;
// the reconciler turns it into a condition and a requeue, never into an error for
// controller-runtime to retry hot: only a human can fix it.

import (
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// refProblem is a user-fixable problem; it becomes a condition.
type refProblem struct {
	Reason  string
	Message string
}

func (p *refProblem) Error() string { return p.Reason + ": " + p.Message }

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
// a requeue that backs off while the same reason persists. Other errors are returned
// unchanged.
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
