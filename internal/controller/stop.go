/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// A stop of the manager cancels the context of every pass in flight. What such a pass
// saw after the cancel (a database read or an API request that failed with
// context.Canceled) says nothing about the database or the cluster, so none of it is
// written: no status, no condition, no Event, no metric. Nor is it an error:
// controller-runtime logs a returned error as "Reconciler error" with a stack trace,
// and the next leader reconciles every object anyway.

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// stopped reports whether the pass's context was cancelled: the manager is stopping.
// (The reads' own timeouts are contexts of their own, below the pass's.)
func stopped(ctx context.Context) bool { return ctx.Err() != nil }

// endPass is what a Reconcile returns: result and err, or nothing when the manager
// stopped during the pass.
func endPass(ctx context.Context, result ctrl.Result, err error) (ctrl.Result, error) {
	if !stopped(ctx) {
		return result, err
	}
	if err != nil {
		logf.FromContext(ctx).V(1).Info("pass ended by the manager's stop", "error", err.Error())
	}
	return ctrl.Result{}, nil
}
