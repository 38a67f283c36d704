/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

// Package v1alpha1 contains the outbox.dev/v1alpha1 API: OutboxPipeline (a relay from
// a PostgreSQL outbox table to Kafka), DeadLetterReplay (a controlled, audited replay of
// DEAD events) and RetentionPolicy (scheduled archiving of terminal rows).
// +kubebuilder:object:generate=true
// +groupName=outbox.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of these kinds.
	GroupVersion = schema.GroupVersion{Group: "outbox.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
