/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// Children an apply cannot bring to the desired state because a field that differs is
// immutable: the child is deleted (only the very object looked at, by UID) and the
// apply that follows creates it anew.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// mustReplace reports whether live has to be deleted and created again to become
// desired. The one case: a metrics Service made with a cluster IP by an operator
// version before the headless one (DesiredService); spec.clusterIP cannot change once
// set, so an apply of clusterIP None to it would fail on every pass.
func mustReplace(desired, live client.Object) bool {
	d, ok := desired.(*corev1.Service)
	if !ok {
		return false
	}
	l, ok := live.(*corev1.Service)
	return ok && d.Spec.ClusterIP == corev1.ClusterIPNone && l.Spec.ClusterIP != corev1.ClusterIPNone
}

// deleteForReplace deletes live with its UID as a precondition. Gone already, or
// replaced meanwhile (the cache still showed the old one), is what was wanted.
func (a childApplier) deleteForReplace(ctx context.Context, live client.Object, kind string) error {
	uid := live.GetUID()
	err := a.c.Delete(ctx, live, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("delete %s %s to create it anew: %w", kind, live.GetName(), err)
}
