/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReplaySelector chooses which DEAD events are replayed. All given criteria must match
// (AND). At least one criterion is required, so "replay everything" is never an
// accident.
// +kubebuilder:validation:XValidation:rule="has(self.eventIDs) || has(self.eventType) || has(self.aggregateType) || has(self.aggregateID) || has(self.errorCode) || has(self.destination) || has(self.createdAfter) || has(self.createdBefore)",message="selector must set at least one of eventIDs, eventType, aggregateType, aggregateID, errorCode, destination, createdAfter, createdBefore"
// +kubebuilder:validation:XValidation:rule="!has(self.createdAfter) || !has(self.createdBefore) || timestamp(self.createdAfter) < timestamp(self.createdBefore)",message="selector.createdAfter must be before selector.createdBefore"
// +kubebuilder:validation:XValidation:rule="!has(self.aggregateID) || has(self.aggregateType)",message="selector.aggregateID needs selector.aggregateType"
type ReplaySelector struct {
	// EventIDs replays exactly these events (their original event_id is kept).
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=200
	// +kubebuilder:validation:XValidation:rule="self.all(id, !id.contains(','))",message="selector.eventIDs must not contain commas"
	// +listType=set
	// +optional
	EventIDs []string `json:"eventIDs,omitempty"`

	// EventType matches the event_type column.
	// +kubebuilder:validation:MaxLength=200
	// +optional
	EventType string `json:"eventType,omitempty"`

	// AggregateType matches the aggregate_type column.
	// +kubebuilder:validation:MaxLength=200
	// +optional
	AggregateType string `json:"aggregateType,omitempty"`

	// AggregateID matches the aggregate_id column (requires aggregateType).
	// +kubebuilder:validation:MaxLength=200
	// +optional
	AggregateID string `json:"aggregateID,omitempty"`

	// ErrorCode matches last_error_code, e.g. to replay only what a fixed bug killed.
	// +kubebuilder:validation:MaxLength=200
	// +optional
	ErrorCode string `json:"errorCode,omitempty"`

	// Destination matches the destination (topic) column.
	// +kubebuilder:validation:MaxLength=249
	// +optional
	Destination string `json:"destination,omitempty"`

	// CreatedAfter matches rows created at or after this time (RFC 3339).
	// +optional
	CreatedAfter *metav1.Time `json:"createdAfter,omitempty"`

	// CreatedBefore matches rows created before this time (RFC 3339).
	// +optional
	CreatedBefore *metav1.Time `json:"createdBefore,omitempty"`
}

// DeadLetterReplaySpec is one controlled replay. It cannot be changed once the replay
// has started; create a new DeadLetterReplay instead.
type DeadLetterReplaySpec struct {
	// PipelineRef names the OutboxPipeline whose table holds the DEAD events.
	PipelineRef PipelineReference `json:"pipelineRef"`

	// Selector chooses the DEAD events to replay.
	Selector ReplaySelector `json:"selector"`

	// Reason is recorded in the replay audit table with the selection and the counts.
	// Say what was fixed, e.g. "INC-1234: consumer schema v3 deployed".
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason"`

	// RequestedBy is recorded in the audit table (a person or a ticket).
	// +kubebuilder:validation:MaxLength=200
	// +optional
	RequestedBy string `json:"requestedBy,omitempty"`

	// Rate limits the replay to this many events per second, so a downstream that just
	// recovered is not flattened again.
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Rate int32 `json:"rate,omitempty"`

	// CanarySize is the number of events replayed first; the rest only follows if the
	// canary does not produce too many new dead events. 0 disables the canary.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	CanarySize *int32 `json:"canarySize,omitempty"`

	// MaxNewDeadPercent: the replay stops (Failed) when more than this percentage of the
	// canary goes DEAD again.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxNewDeadPercent *int32 `json:"maxNewDeadPercent,omitempty"`

	// DryRun only counts and audits the matching events; nothing is replayed.
	// +kubebuilder:default=false
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
}

// Replay phases.
const (
	ReplayPending   = "Pending"
	ReplayRunning   = "Running"
	ReplaySucceeded = "Succeeded"
	ReplayFailed    = "Failed"
)

// DeadLetterReplayStatus mirrors the replay Job and the audit record.
type DeadLetterReplayStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase is Pending, Running, Succeeded or Failed.
	// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
	// +optional
	Phase string `json:"phase,omitempty"`

	// Conditions: Ready (False with a reason while the replay cannot start, e.g.
	// PipelineNotFound or SecretNotFound).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ReplayID identifies this replay in the <table>_replay_audit table.
	// +optional
	ReplayID string `json:"replayID,omitempty"`

	// JobName is the Job running the replay.
	// +optional
	JobName string `json:"jobName,omitempty"`

	// Matched is the number of DEAD events the selector matched.
	// +optional
	Matched int64 `json:"matched,omitempty"`

	// Replayed is the number of events handed back to the relay.
	// +optional
	Replayed int64 `json:"replayed,omitempty"`

	// Succeeded is the number of replayed events published successfully.
	// +optional
	Succeeded int64 `json:"succeeded,omitempty"`

	// DeadAgain is the number of replayed events that went DEAD again.
	// +optional
	DeadAgain int64 `json:"deadAgain,omitempty"`

	// StartTime is when the replay Job was created. The spec is frozen from then on.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the Job finished (succeeded or failed).
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// DeadLetterReplay replays selected DEAD events of a pipeline with their original
// event_id: canary first, rate-limited, audited.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dlr;replay,categories=outbox
// +kubebuilder:printcolumn:name="Pipeline",type=string,JSONPath=`.spec.pipelineRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matched`
// +kubebuilder:printcolumn:name="Replayed",type=integer,JSONPath=`.status.replayed`
// +kubebuilder:printcolumn:name="Dead Again",type=integer,JSONPath=`.status.deadAgain`
// +kubebuilder:printcolumn:name="Dry Run",type=boolean,JSONPath=`.spec.dryRun`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.startTime) || self.spec == oldSelf.spec",message="spec is immutable once the replay has started; create a new DeadLetterReplay instead"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 52",message="metadata.name must be at most 52 characters (the Job name derives from it)"
type DeadLetterReplay struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the requested replay.
	// +required
	Spec DeadLetterReplaySpec `json:"spec"`

	// Status is observed by the operator.
	// +optional
	Status DeadLetterReplayStatus `json:"status,omitempty"`
}

// DeadLetterReplayList is a list of DeadLetterReplay.
// +kubebuilder:object:root=true
type DeadLetterReplayList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the replays.
	Items []DeadLetterReplay `json:"items"`
}

func init() {
	SchemeBuilder.Register(&DeadLetterReplay{}, &DeadLetterReplayList{})
}
