/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
)

// NeverCached lists kinds the manager's client must never serve from (or start) an
// informer for: Secrets are read one at a time, in the referencing object's namespace.
func NeverCached() []client.Object { return []client.Object{&corev1.Secret{}} }

// SetupAll registers the three reconcilers with mgr. relayImage is the default relay
// image (RELAY_IMAGE); pools are shared so one pipeline has one small DB pool.
func SetupAll(ctx context.Context, mgr ctrl.Manager, relayImage string, pools *outboxstats.Pools) error {
	if relayImage == "" {
		relayImage = DefaultRelayImage
	}
	if pools == nil {
		pools = outboxstats.NewPools()
	}
	reader := mgr.GetAPIReader()
	if err := (&OutboxPipelineReconciler{
		Client: mgr.GetClient(), APIReader: reader, Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("outboxpipeline-controller"), RelayImage: relayImage, Pools: pools,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up OutboxPipeline controller: %w", err)
	}
	if err := (&DeadLetterReplayReconciler{
		Client: mgr.GetClient(), APIReader: reader, Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("deadletterreplay-controller"), RelayImage: relayImage, Pools: pools,
	}).SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up DeadLetterReplay controller: %w", err)
	}
	if err := (&RetentionPolicyReconciler{
		Client: mgr.GetClient(), APIReader: reader, Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("retentionpolicy-controller"), RelayImage: relayImage, Pools: pools,
	}).SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up RetentionPolicy controller: %w", err)
	}
	return nil
}
