/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// The reference of a DeadLetterReplay or RetentionPolicy to its OutboxPipeline:
// resolving it (with the pipeline's Secrets), and the index and watch that wake the
// referrers when the pipeline appears or changes.

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// pipelineRefIndex indexes replays and retention policies by the pipeline they name,
// so creating a missing pipeline wakes exactly the objects waiting for it.
const pipelineRefIndex = ".spec.pipelineRef.name"

// resolvedPipeline is a referenced pipeline whose Secrets were found.
type resolvedPipeline struct {
	P     *outboxv1.OutboxPipeline // with defaults
	Table pgident.Table
	DSN   string
}

// resolvePipeline fetches the named pipeline in namespace and checks its Secrets. A
// missing pipeline or Secret is a *refProblem.
func resolvePipeline(ctx context.Context, c client.Client, reader client.Reader, namespace, name string) (*resolvedPipeline, error) {
	var p outboxv1.OutboxPipeline
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &refProblem{outboxv1.ReasonPipelineNotFound, fmt.Sprintf(
				"OutboxPipeline %q (spec.pipelineRef.name) was not found in namespace %q; create it or fix the reference",
				name, namespace)}
		}
		return nil, fmt.Errorf("get OutboxPipeline %s/%s: %w", namespace, name, err)
	}
	pd := p.WithDefaults()
	table, err := pgident.NewTable(pd.Spec.Source.Schema, pd.Spec.Source.Table)
	if err != nil {
		return nil, &refProblem{outboxv1.ReasonInvalidSpec, fmt.Sprintf("OutboxPipeline %q: %v", name, err)}
	}
	values, err := readSecretRefs(ctx, reader, namespace, SecretRefs(pd))
	if err != nil {
		if problem, err := asRefProblem(err); err == nil {
			return nil, &refProblem{problem.Reason, fmt.Sprintf("OutboxPipeline %q: %s", name, problem.Message)}
		}
		return nil, err
	}
	return &resolvedPipeline{P: pd, Table: table, DSN: string(values.Data[pd.Spec.Source.DSNSecretRef])}, nil
}

// indexPipelineRef registers the field index for obj (a list of refs extractor).
func indexPipelineRef(ctx context.Context, mgr ctrl.Manager, obj client.Object, ref func(client.Object) string) error {
	return mgr.GetFieldIndexer().IndexField(ctx, obj, pipelineRefIndex, func(o client.Object) []string {
		return []string{ref(o)}
	})
}

// enqueueReferrers maps a pipeline event to the objects (of newList's kind) naming it.
func enqueueReferrers(c client.Reader, newList func() client.ObjectList) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return listRequests(ctx, c, o.GetNamespace(), pipelineRefIndex, o.GetName(), newList)
	})
}

// listRequests lists the objects (of newList's kind) in ns whose index field has
// value, as requests.
func listRequests(ctx context.Context, c client.Reader, ns, field, value string, newList func() client.ObjectList) []reconcile.Request {
	list := newList()
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingFields{field: value}); err != nil {
		return nil
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, it := range items {
		if o, ok := it.(client.Object); ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	return reqs
}

func newPipelineList() client.ObjectList  { return &outboxv1.OutboxPipelineList{} }
func newReplayList() client.ObjectList    { return &outboxv1.DeadLetterReplayList{} }
func newRetentionList() client.ObjectList { return &outboxv1.RetentionPolicyList{} }
