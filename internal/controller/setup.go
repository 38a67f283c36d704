/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// Wiring the reconcilers into a manager: what the manager may cache, and SetupAll.

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
)

// CacheByObject limits the manager's informers for owned kinds to objects the operator
// manages, so it never caches every Deployment, Service or Job of the cluster. Of
// Secrets the cache holds the identity only (name, namespace, UID, resourceVersion:
// keepSecretIdentity), from a metadata watch that tells when one changed; their data
// is read one by one, uncached, when it did (secretCache).
func CacheByObject() map[client.Object]cache.ByObject {
	managed := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy})}
	return map[client.Object]cache.ByObject{
		&corev1.Secret{}:                {Transform: keepSecretIdentity},
		&appsv1.Deployment{}:            managed,
		&corev1.Service{}:               managed,
		&corev1.ServiceAccount{}:        managed,
		&policyv1.PodDisruptionBudget{}: managed,
		&batchv1.Job{}:                  managed,
		&batchv1.CronJob{}:              managed,
	}
}

// NeverCached lists kinds the manager's client must never serve from (or start) an
// informer for: a Secret's data is read one at a time, in the referencing object's
// namespace (only its metadata is watched).
func NeverCached() []client.Object { return []client.Object{&corev1.Secret{}} }

// Option tunes SetupAll.
type Option func(*OutboxPipelineReconciler)

// WithSlotReplacedFor sets how long the SlotReplaced condition stays
// (DefaultSlotReplacedFor otherwise): tests use seconds.
func WithSlotReplacedFor(d time.Duration) Option {
	return func(r *OutboxPipelineReconciler) { r.SlotReplacedFor = d }
}

// WithMaxConcurrentReconciles sets how many OutboxPipelines are reconciled at the same
// time (DefaultMaxConcurrentReconciles otherwise).
func WithMaxConcurrentReconciles(n int) Option {
	return func(r *OutboxPipelineReconciler) { r.MaxConcurrentReconciles = n }
}

// SetupAll registers the three reconcilers with mgr. relayImage is the default relay
// image (RELAY_IMAGE); pools are shared so one database has one bounded pool.
func SetupAll(ctx context.Context, mgr ctrl.Manager, relayImage string, pools *outboxstats.Pools, opts ...Option) error {
	if relayImage == "" {
		relayImage = DefaultRelayImage
	}
	if pools == nil {
		pools = outboxstats.NewPools()
	}
	reader := mgr.GetAPIReader()
	// One Secret cache for the three: a Secret read for a pipeline is not read again
	// for its replays and retention policies.
	secrets := newSecretCache(mgr.GetCache(), reader)
	pipelines := &OutboxPipelineReconciler{
		Client: mgr.GetClient(), APIReader: reader, Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("outboxpipeline-controller"), RelayImage: relayImage, Pools: pools,
		secrets: secrets,
	}
	for _, o := range opts {
		o(pipelines)
	}
	// First: it registers the Secret indexes the other two controllers' watches use.
	if err := pipelines.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up OutboxPipeline controller: %w", err)
	}
	if err := (&DeadLetterReplayReconciler{
		Client: mgr.GetClient(), APIReader: reader, Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("deadletterreplay-controller"), RelayImage: relayImage, Pools: pools,
		secrets: secrets,
	}).SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up DeadLetterReplay controller: %w", err)
	}
	if err := (&RetentionPolicyReconciler{
		Client: mgr.GetClient(), APIReader: reader, Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("retentionpolicy-controller"), RelayImage: relayImage, Pools: pools,
		secrets: secrets,
	}).SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up RetentionPolicy controller: %w", err)
	}
	return nil
}
