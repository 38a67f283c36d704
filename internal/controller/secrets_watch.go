/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// The watch on Secret metadata and what its events wake: the pipelines that reference
// the Secret, the replays and retention policies of those pipelines, and the replays
// whose consumer database it holds. A changed Secret is read by that pass at once
// (secretCache), so a rotated password reaches the status reads and rolls the
// workers without waiting for statusInterval, and a Secret created after its
// referrer ends the referrer's backoff.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// secretRefIndex indexes pipelines, and replays with spec.consumer, by the names of the
// Secrets they reference in their own namespace.
const secretRefIndex = ".spec.secretRefs.name"

// indexSecretRefs registers the Secret-name indexes the Secret watch looks up.
func indexSecretRefs(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &outboxv1.OutboxPipeline{}, secretRefIndex, func(o client.Object) []string {
		return secretNames(SecretRefs(o.(*outboxv1.OutboxPipeline)))
	}); err != nil {
		return fmt.Errorf("index OutboxPipelines by Secret: %w", err)
	}
	if err := idx.IndexField(ctx, &outboxv1.DeadLetterReplay{}, secretRefIndex, func(o client.Object) []string {
		if c := o.(*outboxv1.DeadLetterReplay).Spec.Consumer; c != nil {
			return []string{c.DatabaseSecretRef.Name}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index DeadLetterReplays by Secret: %w", err)
	}
	return nil
}

func secretNames(refs []NamedRef) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range refs {
		if !seen[r.Ref.Name] {
			seen[r.Ref.Name] = true
			out = append(out, r.Ref.Name)
		}
	}
	return out
}

// secretWatch maps a Secret event to the objects to reconcile.
type secretWatch struct {
	c       client.Reader // the manager's cache, with the indexes above
	secrets *secretCache
}

// watchesSecrets adds the Secret metadata watch to a controller; requests maps an
// event's Secret to the requests of that controller's kind. Only a new
// resourceVersion counts (a resync is no change).
func watchesSecrets(b *builder.Builder, w secretWatch, requests func(ctx context.Context, ns, name string) []reconcile.Request) *builder.Builder {
	return b.WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		w.secrets.forgetIfGone(ctx, client.ObjectKeyFromObject(o))
		return requests(ctx, o.GetNamespace(), o.GetName())
	}), builder.WithPredicates(predicate.ResourceVersionChangedPredicate{}))
}

// pipelines are the requests of the pipelines in ns that reference Secret name.
func (w secretWatch) pipelines(ctx context.Context, ns, name string) []reconcile.Request {
	return listRequests(ctx, w.c, ns, secretRefIndex, name, newPipelineList)
}

// replays are the requests of the replays of those pipelines, and of the replays whose
// consumer database Secret it is.
func (w secretWatch) replays(ctx context.Context, ns, name string) []reconcile.Request {
	reqs := w.referrersOfPipelines(ctx, ns, name, newReplayList)
	return append(reqs, listRequests(ctx, w.c, ns, secretRefIndex, name, newReplayList)...)
}

// retentionPolicies are the requests of the retention policies of those pipelines.
func (w secretWatch) retentionPolicies(ctx context.Context, ns, name string) []reconcile.Request {
	return w.referrersOfPipelines(ctx, ns, name, newRetentionList)
}

func (w secretWatch) referrersOfPipelines(ctx context.Context, ns, name string, newList func() client.ObjectList) []reconcile.Request {
	var reqs []reconcile.Request
	for _, p := range w.pipelines(ctx, ns, name) {
		reqs = append(reqs, listRequests(ctx, w.c, ns, pipelineRefIndex, p.Name, newList)...)
	}
	return reqs
}
