/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

// SecretKeyRef selects one key of a Secret in the SAME namespace as the resource that
// holds the reference. There is deliberately no namespace field: a pipeline can never
// read another namespace's Secret.
type SecretKeyRef struct {
	// Name of the Secret, in the namespace of this resource.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Key inside the Secret's data whose value is used.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// PipelineReference names an OutboxPipeline in the same namespace.
type PipelineReference struct {
	// Name of the OutboxPipeline, in the namespace of this resource.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
}

// Condition types shared by the kinds of this group.
const (
	// ConditionReady is True when the resource does what it was asked to do.
	ConditionReady = "Ready"
	// ConditionProgressing is True while a change is being rolled out.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when something needs a human: database unreachable,
	// dead events piling up, events waiting longer than the threshold.
	ConditionDegraded = "Degraded"
	// ConditionStalled (kstatus convention, present only while True) says waiting will
	// not help: a user must act (create the Secret, fix the spec, start the consumer).
	// Its reason and message are Ready's. GitOps tools (Flux, kpt, cli-utils) then
	// report Failed instead of waiting for their timeout.
	ConditionStalled = "Stalled"
	// ConditionReconciling (kstatus convention, present only while True) says the
	// resource is on its way to what the spec asks: a pipeline rolling out, a replay
	// not finished yet. GitOps tools then report InProgress, not Current.
	ConditionReconciling = "Reconciling"
	// ConditionSlotReplaced (OutboxPipeline, present only while True) says the operator
	// replaced the pipeline's replication slot recently (reason SlotInvalidated or
	// SlotMissing; status.replication.lastReplaced keeps the record). It is
	// informational: the pipeline works again, so it changes neither Ready nor
	// Degraded, nor what kstatus or Argo CD report. It goes after its window (an hour).
	ConditionSlotReplaced = "SlotReplaced"
)
