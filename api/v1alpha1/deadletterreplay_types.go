/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReplaySelector chooses which DEAD events (spec.pipelineRef) or parked messages
// (spec.consumer) are replayed. All given criteria must match (AND). At least one
// criterion is required, so "replay everything" is never an accident. A consumer target
// takes eventIDs, eventType, errorCode, createdAfter and createdBefore.
// +kubebuilder:validation:XValidation:rule="has(self.eventIDs) || has(self.eventType) || has(self.aggregateType) || has(self.aggregateID) || has(self.errorCode) || has(self.destination) || has(self.createdAfter) || has(self.createdBefore)",message="selector must set at least one of eventIDs, eventType, aggregateType, aggregateID, errorCode, destination, createdAfter, createdBefore"
// +kubebuilder:validation:XValidation:rule="!has(self.createdAfter) || !has(self.createdBefore) || timestamp(self.createdAfter) < timestamp(self.createdBefore)",message="selector.createdAfter must be before selector.createdBefore"
// +kubebuilder:validation:XValidation:rule="!has(self.aggregateID) || has(self.aggregateType)",message="selector.aggregateID needs selector.aggregateType"
type ReplaySelector struct {
	// EventIDs replays exactly these events (their original event_id is kept). With
	// spec.consumer: the parked messages with these event ids.
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=200
	// +kubebuilder:validation:XValidation:rule="self.all(id, !id.contains(','))",message="selector.eventIDs must not contain commas"
	// +listType=set
	// +optional
	EventIDs []string `json:"eventIDs,omitempty"`

	// EventType matches the event_type column (of the outbox table, or of the consumer's
	// message_consume_parked table with spec.consumer).
	// +kubebuilder:validation:MaxLength=200
	// +optional
	EventType string `json:"eventType,omitempty"`

	// AggregateType matches the aggregate_type column. Outbox targets only.
	// +kubebuilder:validation:MaxLength=200
	// +optional
	AggregateType string `json:"aggregateType,omitempty"`

	// AggregateID matches the aggregate_id column (requires aggregateType). Outbox
	// targets only.
	// +kubebuilder:validation:MaxLength=200
	// +optional
	AggregateID string `json:"aggregateID,omitempty"`

	// ErrorCode matches last_error_code, e.g. to replay only what a fixed bug killed.
	// With spec.consumer it matches the park code (error_code of message_consume_parked:
	// retries_exhausted, wait_timeout, permanent, payload_conflict, invalid_message,
	// handler_panic, version_gap, predecessor_parked).
	// +kubebuilder:validation:MaxLength=200
	// +optional
	ErrorCode string `json:"errorCode,omitempty"`

	// Destination matches the destination (topic) column. Outbox targets only.
	// +kubebuilder:validation:MaxLength=249
	// +optional
	Destination string `json:"destination,omitempty"`

	// CreatedAfter matches rows created at or after this time (RFC 3339). With
	// spec.consumer: messages first parked at or after it (first_seen_at).
	// +optional
	CreatedAfter *metav1.Time `json:"createdAfter,omitempty"`

	// CreatedBefore matches rows created before this time (RFC 3339). With
	// spec.consumer: messages first parked before it (first_seen_at).
	// +optional
	CreatedBefore *metav1.Time `json:"createdBefore,omitempty"`
}

// ConsumerTarget names a consumer group of the inbox package whose parked messages
// are replayed: the rows of message_consume_parked in the consumer's own database.
type ConsumerTarget struct {
	// Group is the consumer group (message_consume_parked.consumer_group). A running
	// inbox.Consumer of this group takes the replay request within its ReplayPoll
	// (5s by default) and handles the messages again with its own handler.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Group string `json:"group"`

	// Schema is the schema of the inbox tables (the one the consumer passes to
	// inbox.Migrate and inbox.New): lower-case letters, digits and underscores.
	// +kubebuilder:default=public
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z_][a-z0-9_]*$`
	// +optional
	Schema string `json:"schema,omitempty"`

	// DatabaseSecretRef points at the Secret key holding the lib/pq connection string of
	// the consumer's database (the one with the inbox tables), in this namespace. It
	// reaches the Job only as a secretKeyRef environment variable (INBOX_DSN) and is
	// never logged; the operator also uses it to read the replay's progress.
	DatabaseSecretRef SecretKeyRef `json:"databaseSecretRef"`

	// Limit bounds the parked messages one replay takes (oldest first). When the status
	// shows matched equal to it, more may match: create another DeadLetterReplay.
	// +kubebuilder:default=1000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Limit int32 `json:"limit,omitempty"`
}

// DeadLetterReplaySpec is one controlled replay, of a pipeline's DEAD outbox events
// (pipelineRef) or of a consumer group's parked messages (consumer). It cannot be
// changed once the replay has started; create a new DeadLetterReplay instead.
// +kubebuilder:validation:XValidation:rule="has(self.pipelineRef) != has(self.consumer)",message="set exactly one of spec.pipelineRef (replay a pipeline's DEAD outbox events) and spec.consumer (replay a consumer group's parked messages)"
// +kubebuilder:validation:XValidation:rule="!has(self.consumer) || !(has(self.selector.aggregateType) || has(self.selector.aggregateID) || has(self.selector.destination))",message="selector.aggregateType, selector.aggregateID and selector.destination select DEAD outbox events; with spec.consumer select parked messages by eventIDs, eventType, errorCode, createdAfter or createdBefore"
// +kubebuilder:validation:XValidation:rule="!has(self.consumer) || !has(self.dryRun) || !self.dryRun",message="dryRun is not available with spec.consumer: a consumer replay cannot only count"
type DeadLetterReplaySpec struct {
	// PipelineRef names the OutboxPipeline whose table holds the DEAD events. Set
	// exactly one of pipelineRef and consumer.
	// +optional
	PipelineRef PipelineReference `json:"pipelineRef,omitzero"`

	// Consumer replays the parked messages of an inbox consumer group instead of DEAD
	// outbox events: the Job (`relayworker inbox-replay`) records a replay request in
	// the consumer's database and waits until a running consumer of the group has
	// handled the selected messages again. It fails when no consumer of the group takes
	// the request (condition reason NoConsumer). canarySize and maxNewDeadPercent do not
	// apply; the Job runs with the operator's default relay image and resources.
	// +optional
	Consumer *ConsumerTarget `json:"consumer,omitempty"`

	// Selector chooses the DEAD events or parked messages to replay.
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
	// recovered is not flattened again. With spec.consumer: messages the consumer
	// handles per second.
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Rate int32 `json:"rate,omitempty"`

	// CanarySize is the number of events replayed first; the rest only follows if the
	// canary does not produce too many new dead events. 0 disables the canary. Ignored
	// with spec.consumer.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	CanarySize *int32 `json:"canarySize,omitempty"`

	// MaxNewDeadPercent: the replay stops (Failed) when more than this percentage of the
	// canary goes DEAD again. Ignored with spec.consumer.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxNewDeadPercent *int32 `json:"maxNewDeadPercent,omitempty"`

	// DryRun only counts and audits the matching events; nothing is replayed. Not
	// available with spec.consumer.
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

// ConsumerReplayStatus is the consumer group's record of a replay with spec.consumer:
// its row in message_consume_replay in the consumer database.
type ConsumerReplayStatus struct {
	// RequestID is the replay_id of the request in message_consume_replay (the
	// consumer logs it as replayId).
	// +optional
	RequestID int64 `json:"requestID,omitempty"`

	// State is the request's status there: REQUESTED (no consumer of the group has
	// taken it yet), RUNNING, DONE or FAILED.
	// +optional
	State string `json:"state,omitempty"`

	// Applied is the number of parked messages whose handler ran again and committed.
	// +optional
	Applied int64 `json:"applied,omitempty"`

	// Duplicates is the number of messages that already had their effect (an earlier
	// delivery or a newer version); they were only marked REPLAYED.
	// +optional
	Duplicates int64 `json:"duplicates,omitempty"`
}

// DeadLetterReplayStatus mirrors the replay Job and the audit record (with
// spec.consumer: the consumer group's replay record).
type DeadLetterReplayStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase is Pending, Running, Succeeded or Failed.
	// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
	// +optional
	Phase string `json:"phase,omitempty"`

	// Conditions: Ready (False with a reason while the replay cannot start, e.g.
	// PipelineNotFound or SecretNotFound, or after it failed: JobFailed, JobMissing,
	// NoConsumer).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ReplayID identifies this replay in the <table>_replay_audit table. With
	// spec.consumer it is the request_key of its message_consume_replay row.
	// +optional
	ReplayID string `json:"replayID,omitempty"`

	// JobName is the Job running the replay.
	// +optional
	JobName string `json:"jobName,omitempty"`

	// Matched is the number of DEAD events the selector matched (with spec.consumer:
	// the parked messages the request selected, at most consumer.limit).
	// +optional
	Matched int64 `json:"matched,omitempty"`

	// Replayed is the number of events handed back to the relay (with spec.consumer:
	// the messages the consumer has handled again so far).
	// +optional
	Replayed int64 `json:"replayed,omitempty"`

	// Succeeded is the number of replayed events published successfully (with
	// spec.consumer: applied plus duplicates, the messages now marked REPLAYED).
	// +optional
	Succeeded int64 `json:"succeeded,omitempty"`

	// DeadAgain is the number of replayed events that went DEAD again (with
	// spec.consumer: the messages whose handler failed again; they stay parked).
	// +optional
	DeadAgain int64 `json:"deadAgain,omitempty"`

	// Consumer is the consumer group's record of the replay (spec.consumer only).
	// +optional
	Consumer *ConsumerReplayStatus `json:"consumer,omitempty"`

	// StartTime is when the replay Job was created. The spec is frozen from then on.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the Job finished (succeeded or failed).
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// ReplayedPerSecond is the replay's pace so far: replayed events per second since
	// startTime (0 until the first is replayed).
	// +optional
	ReplayedPerSecond int64 `json:"replayedPerSecond,omitempty"`

	// EstimatedTimeRemaining is how long the rest of the matched events take at that
	// pace (e.g. "4m10s"); empty when unknown or finished.
	// +optional
	EstimatedTimeRemaining string `json:"estimatedTimeRemaining,omitempty"`
}

// DeadLetterReplay replays selected DEAD events of a pipeline with their original
// event_id (canary first, rate-limited, audited), or selected parked messages of an
// inbox consumer group through that group's running consumer (rate-limited, recorded).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dlr;replay,categories=outbox
// +kubebuilder:printcolumn:name="Pipeline",type=string,JSONPath=`.spec.pipelineRef.name`
// +kubebuilder:printcolumn:name="Consumer",type=string,JSONPath=`.spec.consumer.group`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matched`
// +kubebuilder:printcolumn:name="Replayed",type=integer,JSONPath=`.status.replayed`
// +kubebuilder:printcolumn:name="Dead Again",type=integer,JSONPath=`.status.deadAgain`
// +kubebuilder:printcolumn:name="Rate",type=integer,JSONPath=`.status.replayedPerSecond`,description="Replayed events per second so far"
// +kubebuilder:printcolumn:name="ETA",type=string,JSONPath=`.status.estimatedTimeRemaining`,description="Time left at the pace so far"
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
