/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

// Package controller holds the operator: one reconciler per kind (OutboxPipeline,
// DeadLetterReplay, RetentionPolicy), the pure builders that turn a resource into the
// Kubernetes objects it owns, and the few pieces the reconcilers share.
//
// Each Reconcile reads as its list of phases, one named method each: fetch, validate,
// read the referenced Secrets, build the desired children, apply them, observe them
// and the pipeline's database, and finally write the status once, only when it
// changed. A user-fixable problem (refProblem) ends the phases early and becomes a
// condition; any other error goes back to controller-runtime for a retry.
//
// Files, by concern:
//   - <kind>_controller.go: the reconciler, its phases and its watches;
//     <kind>_status.go: how observations become status fields and conditions.
//   - outboxpipeline_database.go: the pipeline's database phase (observeDatabase);
//     outboxpipeline_slot.go, outboxpipeline_slot_plan.go: the slot's finalizer and
//     reconcileSlot, which executes the pure slotAction; outboxpipeline_checks.go:
//     Ready and Degraded as priority lists of pure checks.
//   - builders*.go: pure functions from a resource to its children (no client);
//     builders_pod.go: the one worker pod shape all of them run.
//   - apply.go: server-side apply of children under one field owner (drift is
//     corrected on every pass).
//   - conditions.go, problems.go: conditions, Events, the status write, and turning
//     user-fixable problems into conditions with a backoff.
//   - secrets.go, pipelineref.go, database.go: reading Secrets, resolving a pipeline
//     reference, and the bounded status reads of a pipeline's database;
//     secrets_cache.go, secrets_watch.go: Secrets read again only when they changed,
//     and the Secret metadata watch that queues their referrers.
//   - stop.go: a pass cancelled by the manager's stop writes nothing and is no error.
//   - setup.go: cache restrictions and registration with a manager.
//
// How the operator fits the system is described in docs/architecture.md ("Operator");
// the env vars and flags the children's pods get are docs/worker-contract.md.
package controller
