/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Retention modes.
const (
	RetentionArchive = "Archive"
	RetentionDelete  = "Delete"
)

// RetentionPolicySpec says which terminal rows are removed from the hot table, and when.
// Only terminal rows (SENT, DEAD, finished consumer-log rows) older than the windows are
// touched; PENDING, SENDING and RETRY rows never are, whatever their age. On a table of
// contract v2: outbox rows older than sentRetention that their shard's cursor has
// passed, DEAD hold rows older than deadRetention, and batch log rows older than
// sentRetention; RETRY and HELD hold rows never (docs/contract-v2.md).
// +kubebuilder:validation:XValidation:rule="!has(self.sentRetention) || duration(self.sentRetention) >= duration('1h')",message="sentRetention must be at least 1h (consumers and replays rely on recent history)"
// +kubebuilder:validation:XValidation:rule="!has(self.deadRetention) || duration(self.deadRetention) >= duration('24h')",message="deadRetention must be at least 24h (dead events need a human before they go)"
// +kubebuilder:validation:XValidation:rule="!has(self.consumerLogRetention) || duration(self.consumerLogRetention) >= duration('1h')",message="consumerLogRetention must be at least 1h (it is the consumers' dedup window)"
type RetentionPolicySpec struct {
	// PipelineRef names the OutboxPipeline whose table is cleaned.
	PipelineRef PipelineReference `json:"pipelineRef"`

	// Schedule in cron format (e.g. "15 * * * *" hourly at :15).
	// +kubebuilder:default="15 * * * *"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	// +optional
	Schedule string `json:"schedule,omitempty"`

	// TimeZone of the schedule (IANA name, e.g. "Europe/Berlin"); the controller's
	// time zone when empty.
	// +kubebuilder:validation:MaxLength=100
	// +optional
	TimeZone *string `json:"timeZone,omitempty"`

	// SentRetention keeps SENT rows at least this long after sent_at. It should cover the
	// broker's retention and the longest consumer replay window.
	// +kubebuilder:default="168h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	SentRetention *metav1.Duration `json:"sentRetention,omitempty"`

	// DeadRetention keeps DEAD rows at least this long after they became DEAD (their
	// updated_at), so they can be inspected and replayed.
	// +kubebuilder:default="720h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	DeadRetention *metav1.Duration `json:"deadRetention,omitempty"`

	// ConsumerLogRetention keeps message_consume rows at least this long. It is the
	// consumers' dedup window: a duplicate arriving after it is processed again. Omit it
	// to leave the consumer log alone.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	ConsumerLogRetention *metav1.Duration `json:"consumerLogRetention,omitempty"`

	// Mode: Archive moves rows into <table>_archive before removing them; Delete removes
	// them outright.
	// +kubebuilder:default=Archive
	// +kubebuilder:validation:Enum=Archive;Delete
	// +optional
	Mode string `json:"mode,omitempty"`

	// BatchSize is the number of rows moved per short transaction.
	// +kubebuilder:default=1000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50000
	// +optional
	BatchSize int32 `json:"batchSize,omitempty"`

	// Suspend stops scheduling new runs; a running one finishes.
	// +kubebuilder:default=false
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// RetentionPolicyStatus mirrors the CronJob and the newest run the archive worker
// recorded in the pipeline's database (<table>_archive_runs).
type RetentionPolicyStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (False with a reason such as PipelineNotFound or SecretNotFound;
	// True with Scheduled or Suspended once the CronJob is in place) and Degraded (True
	// with LastRunFailed and the run's error; False with LastRunSucceeded or NoRunsYet;
	// Unknown with DatabaseUnreachable while the run history cannot be read). A failed
	// run does not make the policy un-Ready: the next scheduled run may well succeed.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// CronJobName is the CronJob running the archive command.
	// +optional
	CronJobName string `json:"cronJobName,omitempty"`

	// LastRunTime is when a run was last scheduled.
	// +optional
	LastRunTime *metav1.Time `json:"lastRunTime,omitempty"`

	// LastSuccessfulTime is when a run last finished successfully.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`

	// NextRunTime is when the next run is due (empty while suspended).
	// +optional
	NextRunTime *metav1.Time `json:"nextRunTime,omitempty"`

	// The fields below describe the newest run the archive worker recorded for this
	// policy. They come from the database rather than the Job, so they hold even after
	// the Job is garbage-collected, and they stay empty until a run has been recorded.

	// LastArchiveTime is when the newest recorded run finished (database clock). It
	// can trail lastRunTime while a run is in progress.
	// +optional
	LastArchiveTime *metav1.Time `json:"lastArchiveTime,omitempty"`

	// LastSentArchived is the number of SENT rows the newest run removed from the outbox
	// table: moved to <table>_archive in Archive mode, deleted in Delete mode.
	// +optional
	LastSentArchived *int64 `json:"lastSentArchived,omitempty"`

	// LastDeadArchived is the number of DEAD rows the newest run removed, like
	// lastSentArchived.
	// +optional
	LastDeadArchived *int64 `json:"lastDeadArchived,omitempty"`

	// LastConsumerLogTrimmed is the number of finished message_consume rows the newest
	// run deleted (0 when spec.consumerLogRetention is unset).
	// +optional
	LastConsumerLogTrimmed *int64 `json:"lastConsumerLogTrimmed,omitempty"`

	// LastRunError is why the newest run stopped early, shortened; empty when it
	// succeeded. The counts above then say what it removed before it stopped (removed
	// rows are committed batch by batch). It never contains connection strings.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	LastRunError string `json:"lastRunError,omitempty"`
}

// RetentionPolicy archives or deletes old terminal outbox rows on a schedule, in small
// batches, so the hot table and its indexes stay small.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=orp;retention,categories=outbox
// +kubebuilder:printcolumn:name="Pipeline",type=string,JSONPath=`.spec.pipelineRef.name`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last Run",type=date,JSONPath=`.status.lastRunTime`
// +kubebuilder:printcolumn:name="Next Run",type=string,JSONPath=`.status.nextRunTime`,description="When the next run is due (a time: an age column cannot show the future)"
// +kubebuilder:printcolumn:name="Sent",type=integer,JSONPath=`.status.lastSentArchived`,description="SENT rows the newest recorded run archived (or deleted)"
// +kubebuilder:printcolumn:name="Dead",type=integer,JSONPath=`.status.lastDeadArchived`,description="DEAD rows the newest recorded run archived (or deleted)"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Last Archive",type=date,JSONPath=`.status.lastArchiveTime`,priority=1,description="When the newest recorded run finished"
// +kubebuilder:printcolumn:name="Last Error",type=string,JSONPath=`.status.lastRunError`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 42",message="metadata.name must be at most 42 characters (the CronJob and its Job names derive from it)"
type RetentionPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired policy.
	// +required
	Spec RetentionPolicySpec `json:"spec"`

	// Status is observed by the operator.
	// +optional
	Status RetentionPolicyStatus `json:"status,omitempty"`
}

// RetentionPolicyList is a list of RetentionPolicy.
// +kubebuilder:object:root=true
type RetentionPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the policies.
	Items []RetentionPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RetentionPolicy{}, &RetentionPolicyList{})
}
