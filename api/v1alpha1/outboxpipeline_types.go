/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PostgresSource says where the outbox table lives.
// +kubebuilder:validation:XValidation:rule="!(has(self.contract) && self.contract == 'v2' && has(self.mode) && self.mode == 'LogicalReplication')",message="mode LogicalReplication reads contract v1 tables only and source.contract is v2 (the default when not set): set source.contract: v1 to stream a v1 table (docs/cdc.md), or use mode Polling for v2 (its shard cursors need no replication slot)"
type PostgresSource struct {
	// DSNSecretRef points at the Secret key holding the lib/pq connection string of the
	// PRIMARY database (e.g. "postgres://relay:pw@db:5432/app?sslmode=require"). The DSN
	// is only ever passed to pods as a secretKeyRef environment variable; it never appears
	// in a pod spec, a status or a log line. A literal DSN field does not exist on purpose.
	// The operator also uses it to read lag and dead counts for the status.
	DSNSecretRef SecretKeyRef `json:"dsnSecretRef"`

	// Schema of the outbox table: lower-case letters, digits and underscores.
	// +kubebuilder:default=public
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z_][a-z0-9_]*$`
	// +optional
	Schema string `json:"schema,omitempty"`

	// Table is the outbox table name: lower-case letters, digits and underscores, at most
	// 50 characters so the derived side tables (<table>_archive, <table>_replay_audit) fit
	// PostgreSQL's 63-character identifier limit.
	// +kubebuilder:default=outbox_event
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=50
	// +kubebuilder:validation:Pattern=`^[a-z_][a-z0-9_]*$`
	// +optional
	Table string `json:"table,omitempty"`

	// Migrate runs `relayworker migrate` as an init container of every relay pod, which
	// creates the outbox table, its indexes and side tables if they are missing
	// (idempotent, safe from several pods at once). Leave it false when schema changes go
	// through your own migration tool; the table must then exist before the relay starts.
	// +kubebuilder:default=false
	// +optional
	Migrate bool `json:"migrate,omitempty"`

	// Contract is the outbox table's contract (docs/contract-v2.md); v2 when not set.
	// v2: an insert-only table read through shard cursors (the relay writes nothing
	// per event; failures live in <table>_hold). v1: the table with status and lease
	// columns that the relay updates per event; LogicalReplication reads v1 tables
	// only (docs/cdc.md). The default is written into the object when it is created:
	// a pipeline created while the default was v1 keeps contract v1, and so does one
	// that sets it. Replacing such a pipeline (PUT, `kubectl replace`) with a manifest
	// that omits the field sets v2, which upgrades its table: keep `contract: v1` in
	// the manifests of v1 pipelines. With migrate: true the init container runs
	// `relayworker migrate --contract v2 --shards N`, which creates a v2 table or
	// upgrades an existing v1 table in place (docs/operations.md, "Upgrading a table
	// to contract v2"), or `relayworker migrate --contract v1`, which creates a v1
	// table and refuses a v2 one; until the table follows the spec's contract the
	// pipeline is not Ready (reason ContractMismatch). Once the table is v2
	// (status.tableContract), the pipeline cannot go back to v1; while the table is
	// still v1 it can.
	// +kubebuilder:validation:Enum=v1;v2
	// +kubebuilder:default=v2
	// +optional
	Contract TableContract `json:"contract,omitempty"`

	// Shards is a v2 table's fixed number of shards (aggregates hash to shards; a
	// shard has one worker at a time, so it bounds the workers that share the table): a
	// power of two from 1 to 32768. Unset, the migrate creates a new table with 32
	// shards and leaves an existing table's count as it is (tables created before
	// 2026-12-06 have 256). The migrate applies a change only while the table and its
	// hold table are empty; on a table with rows it refuses with one line (the init
	// container fails). Ignored for contract v1. A worker's every read visits each
	// shard it holds, about 9 µs of PostgreSQL time per shard, so more shards than the
	// workers need cost time on every read (docs/contract-v2.md, "fewer shards").
	// +kubebuilder:validation:XValidation:rule="self in [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768]",message="source.shards must be a power of two from 1 to 32768"
	// +optional
	Shards int32 `json:"shards,omitempty"`

	// Mode is how the relay learns of new events. Polling claims them from the table
	// every pollInterval (or at once after a NOTIFY). LogicalReplication streams the
	// table's inserts from the write-ahead log through a replication slot: one worker
	// holds the slot and claims each row as its transaction commits, in commit order,
	// with no polling scans; polling still takes retries, expired leases and anything
	// the stream left (older than relay.cdcHandoverAfter), so a lost slot delays events
	// and never loses them. Needs wal_level=logical and a DSN user with the REPLICATION
	// attribute that owns the table, and a contract v1 table (set source.contract:
	// v1; a v2 table is read by shard cursors). The slot and publication are named in
	// status.replication; the operator drops them when the pipeline is deleted or
	// leaves this mode (docs/cdc.md).
	// +kubebuilder:validation:Enum=Polling;LogicalReplication
	// +kubebuilder:default=Polling
	// +optional
	Mode SourceMode `json:"mode,omitempty"`

	// MaxSlotLag is how much WAL the replication slot may hold back before the pipeline
	// is Degraded (reason SlotLagging), in bytes ("1Gi", "500Mi"). Set PostgreSQL's
	// max_slot_wal_keep_size above it so a stuck slot is noticed before it is
	// invalidated. LogicalReplication only.
	// +kubebuilder:default="1Gi"
	// +optional
	MaxSlotLag *resource.Quantity `json:"maxSlotLag,omitempty"`
}

// ReplicationStatus is a pipeline's replication slot.
type ReplicationStatus struct {
	// Slot is the replication slot's name (derived from namespace and name).
	Slot string `json:"slot"`
	// Publication is the publication of the outbox table's inserts.
	Publication string `json:"publication"`
	// Exists is false while the slot is not there (before the first worker made it).
	Exists bool `json:"exists"`
	// Active is true while a relay worker streams from the slot.
	// +optional
	Active bool `json:"active,omitempty"`
	// ConfirmedLSN is the position up to which the slot's reader confirmed the stream:
	// every outbox insert committed before it is marked.
	// +optional
	ConfirmedLSN string `json:"confirmedLSN,omitempty"`
	// LagBytes is how much WAL the slot holds back (pg_current_wal_lsn() minus its
	// restart position): what the disk must keep for it.
	// +optional
	LagBytes int64 `json:"lagBytes,omitempty"`
	// WALStatus is PostgreSQL's wal_status of the slot: reserved, extended,
	// unreserved, or lost (invalidated by max_slot_wal_keep_size; the relay then
	// replaces the slot and polling publishes what the lost one would have).
	// +optional
	WALStatus string `json:"walStatus,omitempty"`
	// PublicationTable is the table the publication covers, as PostgreSQL reports it
	// (schema.table; comma-separated if someone added more). When spec.source.table
	// changes, the operator moves the publication to the new table (ALTER PUBLICATION
	// ... SET TABLE) and this field follows; the pipeline is Degraded
	// (PublicationMismatch) while the move fails.
	// +optional
	PublicationTable string `json:"publicationTable,omitempty"`
	// LastReplaced is the newest replacement of the slot by the operator: PostgreSQL
	// had invalidated it, or someone had dropped it. The stream missed what committed
	// meanwhile (polling published it after cdcHandoverAfter). It stays until the next
	// replacement; the SlotReplaced condition shows it for an hour.
	// +optional
	LastReplaced *SlotReplacement `json:"lastReplaced,omitempty"`
}

// SlotReplacement is one replacement of a pipeline's replication slot.
type SlotReplacement struct {
	// Time the operator made the new slot.
	Time metav1.Time `json:"time"`
	// Reason is why the old slot was unusable: SlotInvalidated (PostgreSQL invalidated
	// it, max_slot_wal_keep_size) or SlotMissing (it was gone: dropped outside the
	// operator).
	Reason string `json:"reason"`
	// Message says what happened and what to check.
	Message string `json:"message"`
}

// TableContract is the outbox table's contract.
type TableContract string

// Table contracts.
const (
	ContractV1 TableContract = "v1"
	ContractV2 TableContract = "v2"
)

// V2 reports whether the pipeline's table follows contract v2.
func (s *PostgresSource) V2() bool { return s.Contract == ContractV2 }

// SourceMode is how the relay learns of new events.
type SourceMode string

// Source modes.
const (
	SourcePolling            SourceMode = "Polling"
	SourceLogicalReplication SourceMode = "LogicalReplication"
)

// LogicalReplication reports whether the workers learn of new events from the WAL
// (spec.source.mode LogicalReplication); the operator then keeps the pipeline's slot
// and publication.
func (s *OutboxPipelineSpec) LogicalReplication() bool {
	return s.Source.Mode == SourceLogicalReplication
}

// MessageFormat is the wire format of the relayed messages.
type MessageFormat string

// Message formats.
const (
	MessageNative      MessageFormat = "Native"
	MessageCloudEvents MessageFormat = "CloudEvents"
)

// MessageSettings chooses the wire format (docs/architecture.md, "Message contract").
type MessageSettings struct {
	// Format of every message: Native writes the contract as the headers event_id,
	// event_type, event_version, aggregate_type, aggregate_id and aggregate_version.
	// CloudEvents writes the CloudEvents Kafka protocol binding in binary mode:
	// ce_specversion=1.0, ce_id (event id), ce_source (/outbox-operator/<namespace>/<name>),
	// ce_type (event type), ce_time (created_at), ce_subject (aggregate id), content-type,
	// and the extensions ce_eventversion, ce_aggregatetype and ce_aggregateversion. Key,
	// value and the row's own headers are the same in both; the inbox library reads
	// both. Changing it affects only messages published afterwards.
	// +kubebuilder:validation:Enum=Native;CloudEvents
	// +kubebuilder:default=Native
	// +optional
	Format MessageFormat `json:"format,omitempty"`
}

// KafkaTLS configures TLS to the brokers.
// +kubebuilder:validation:XValidation:rule="!has(self.caSecretRef) || self.enabled",message="tls.caSecretRef is set but tls.enabled is false; set enabled: true or remove caSecretRef"
type KafkaTLS struct {
	// Enabled turns TLS on for every broker connection.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// CASecretRef points at a PEM CA bundle used to verify the brokers. The key is mounted
	// read-only into the relay pods and passed as KAFKA_TLS_CA_FILE. Without it the
	// system trust store is used.
	// +optional
	CASecretRef *SecretKeyRef `json:"caSecretRef,omitempty"`
}

// KafkaSASL configures SASL authentication to the brokers.
type KafkaSASL struct {
	// Mechanism is the SASL mechanism.
	// +kubebuilder:validation:Enum=plain;scram-sha-256;scram-sha-512
	Mechanism string `json:"mechanism"`

	// UsernameSecretRef points at the Secret key holding the SASL user name.
	UsernameSecretRef SecretKeyRef `json:"usernameSecretRef"`

	// PasswordSecretRef points at the Secret key holding the SASL password.
	PasswordSecretRef SecretKeyRef `json:"passwordSecretRef"`
}

// KafkaSink says where events are published. Each row goes to topic = destination
// column, key = message_key column.
type KafkaSink struct {
	// Brokers are the bootstrap brokers as host:port.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:Pattern=`^[^,\s]+:[0-9]{1,5}$`
	// +kubebuilder:validation:items:MaxLength=255
	// +listType=atomic
	Brokers []string `json:"brokers"`

	// TLS to the brokers. Off when omitted.
	// +optional
	TLS *KafkaTLS `json:"tls,omitempty"`

	// SASL authentication. None when omitted.
	// +optional
	SASL *KafkaSASL `json:"sasl,omitempty"`
}

// RelaySettings tune the relay workers. Durations use Go syntax: 500ms, 30s, 5m, 1h.
// +kubebuilder:validation:XValidation:rule="!has(self.lease) || !has(self.pollInterval) || duration(self.lease) > duration(self.pollInterval)",message="relay.lease must be longer than relay.pollInterval (a worker must be able to finish a batch before its lease expires)"
// +kubebuilder:validation:XValidation:rule="!has(self.maxBackoff) || !has(self.minBackoff) || duration(self.maxBackoff) >= duration(self.minBackoff)",message="relay.maxBackoff must be at least relay.minBackoff"
// +kubebuilder:validation:XValidation:rule="!has(self.cdcHandoverAfter) || duration(self.cdcHandoverAfter) > duration('0s')",message="relay.cdcHandoverAfter must be positive"
// +kubebuilder:validation:XValidation:rule="!has(self.lease) || duration(self.lease) >= duration('1s')",message="relay.lease must be at least 1s"
// +kubebuilder:validation:XValidation:rule="!has(self.pollInterval) || duration(self.pollInterval) >= duration('10ms')",message="relay.pollInterval must be at least 10ms"
type RelaySettings struct {
	// Replicas is the number of relay workers. Workers share the table safely (claims use
	// SKIP LOCKED and leases); more workers add throughput until the database or the
	// brokers saturate.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=50
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// BatchSize is the most events a worker reads and publishes per batch: on a table of
	// contract v2, rows of one shard's window per read; on v1, rows claimed per short
	// transaction.
	// +kubebuilder:default=500
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	BatchSize int32 `json:"batchSize,omitempty"`

	// Lease is how long a worker owns what it took: on a table of contract v2 a shard
	// (renewed every lease/3 while the worker lives), on v1 a claimed batch. A worker that
	// dies or stalls loses it when the lease ends, and another worker takes the shard
	// (or the rows) over; its late writes are fenced by the owner token. Must exceed
	// pollInterval and the normal p99 of a batch's publish time.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Lease *metav1.Duration `json:"lease,omitempty"`

	// PollInterval is the polling safety net when no NOTIFY wake-up arrives.
	// +kubebuilder:default="1s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`

	// MaxAttempts is the number of publish attempts before a row goes DEAD.
	// +kubebuilder:default=12
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxAttempts int32 `json:"maxAttempts,omitempty"`

	// MinBackoff is the first retry delay; later delays grow exponentially with jitter.
	// +kubebuilder:default="500ms"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	MinBackoff *metav1.Duration `json:"minBackoff,omitempty"`

	// MaxBackoff caps the retry delay.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	MaxBackoff *metav1.Duration `json:"maxBackoff,omitempty"`

	// UnknownTopicGrace is how long an event for a topic that does not exist is retried
	// before it goes DEAD (gives topic automation time to catch up).
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	UnknownTopicGrace *metav1.Duration `json:"unknownTopicGrace,omitempty"`

	// CDCHandoverAfter: in LogicalReplication mode, how old a PENDING row must be
	// before polling claims it. The slot's reader claims new rows within milliseconds;
	// a row still PENDING after this was left by the stream (an older version of its
	// aggregate was in flight, the reader was down, the slot was lost) and polling
	// takes it. Ignored in Polling mode.
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	CDCHandoverAfter *metav1.Duration `json:"cdcHandoverAfter,omitempty"`

	// LogLevel of the workers.
	// +kubebuilder:default=info
	// +kubebuilder:validation:Enum=debug;info;error
	// +optional
	LogLevel string `json:"logLevel,omitempty"`
}

// MonitoringSettings control how the operator watches the outbox table.
// +kubebuilder:validation:XValidation:rule="!has(self.statusInterval) || duration(self.statusInterval) >= duration('5s')",message="monitoring.statusInterval must be at least 5s"
type MonitoringSettings struct {
	// StatusInterval is how often the operator reads the outbox table (cheap, indexed,
	// 3s timeout) to refresh the status counts and conditions. Secret changes do not
	// wait for it: the operator watches the referenced Secrets.
	// +kubebuilder:default="15s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	StatusInterval *metav1.Duration `json:"statusInterval,omitempty"`

	// OldestPendingAgeThreshold: when the oldest unpublished event (status.pending or
	// status.retrying) is older than this, the pipeline is Degraded (reason
	// EventsDelayed).
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	OldestPendingAgeThreshold *metav1.Duration `json:"oldestPendingAgeThreshold,omitempty"`

	// DeadGrowthWindow: after the DEAD count increases, the pipeline stays Degraded
	// (reason DeadEventsIncreasing) for this long. Dead events are not garbage: inspect
	// them (last_error_code) and replay them with a DeadLetterReplay once fixed.
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	DeadGrowthWindow *metav1.Duration `json:"deadGrowthWindow,omitempty"`

	// Tracing exports the relay's OpenTelemetry spans (docs/monitoring.md, "Tracing").
	// +optional
	Tracing TracingSettings `json:"tracing,omitempty"`
}

// TracingSettings turn on the relay's OpenTelemetry spans: one per published batch,
// linked to the producers' spans whose trace context outbox.Publish recorded.
type TracingSettings struct {
	// OTLPEndpoint is the OTLP/HTTP (http/protobuf) endpoint of a collector, for
	// example http://otel-collector.observability:4318; the relay pods get it as
	// OTEL_EXPORTER_OTLP_ENDPOINT. Empty (the default): no spans are exported and the
	// relay installs no tracer.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	// +optional
	OTLPEndpoint string `json:"otlpEndpoint,omitempty"`
}

// OutboxPipelineSpec is the desired relay from one outbox table to Kafka.
type OutboxPipelineSpec struct {
	// Source is the PostgreSQL outbox table.
	Source PostgresSource `json:"source"`

	// Sink is the Kafka cluster.
	Sink KafkaSink `json:"sink"`

	// Relay tunes the relay workers.
	// +kubebuilder:default={}
	// +optional
	Relay RelaySettings `json:"relay,omitempty"`

	// Monitoring tunes the status reader and the Degraded thresholds.
	// +kubebuilder:default={}
	// +optional
	Monitoring MonitoringSettings `json:"monitoring,omitempty"`

	// Message chooses how events look on the wire.
	// +kubebuilder:default={}
	// +optional
	Message MessageSettings `json:"message,omitempty"`

	// Paused scales the relay to zero workers. Events keep accumulating as PENDING and
	// nothing is lost; they are published when the pipeline is resumed.
	// +kubebuilder:default=false
	// +optional
	Paused bool `json:"paused,omitempty"`

	// Image overrides the relay worker image (default: the operator's RELAY_IMAGE). The
	// image must contain the binary at /relayworker and run as a non-root user.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// ImagePullPolicy of the relay containers.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// ImagePullSecrets for private registries (Secrets in this namespace).
	// +listType=atomic
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Resources of the relay container. Default: requests 50m CPU / 64Mi, limit 256Mi.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// PodAnnotations are added to the relay pods.
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`

	// NodeSelector of the relay pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of the relay pods.
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// PriorityClassName of the relay pods.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// OutboxPipelineStatus is what the operator observed, from Kubernetes and from the
// outbox table itself.
type OutboxPipelineStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (workers up and database reachable), Progressing (a rollout is
	// in flight), Degraded (needs a human: database unreachable, table missing, workers
	// cannot write to any Kafka broker, events delayed past the threshold, dead events
	// increasing).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// TableContract is the contract the outbox table follows as last read (v1 or v2;
	// empty before the table was read). While it is v1, spec.source.contract may go
	// back from v2 to v1 (the table was never upgraded); once it is v2 it may not.
	// +optional
	TableContract string `json:"tableContract,omitempty"`

	// TableShards is a v2 table's shard count as last read (0 for a v1 table, or before
	// the table was read): what a table made without spec.source.shards got (32 since
	// 2026-12-06, 256 before), and how many workers can share it.
	// +optional
	TableShards int32 `json:"tableShards,omitempty"`

	// Replicas is the desired number of relay workers.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyWorkers is the number of relay pods passing their readiness probe.
	// +optional
	ReadyWorkers int32 `json:"readyWorkers,omitempty"`

	// Workers is "ready/desired", for `kubectl get`.
	// +optional
	Workers string `json:"workers,omitempty"`

	// Pending is the number of committed events not yet published and not retrying: on a
	// table of contract v2 the rows past their shard's cursor plus the HELD hold rows
	// (newer versions waiting behind a retry); exact for backlogs up to about 16,384
	// rows, estimated per shard from the rows counted beyond that. On v1, the PENDING
	// rows. The counts are always present so
	// `kubectl get` shows 0 rather than a blank; they are meaningful once lastCheckTime
	// is set.
	// +optional
	Pending int64 `json:"pending"`

	// Sending is what is in flight right now: on a table of contract v2 the shards under
	// a live lease with something to publish (v2 has no rows in flight; its unit of work
	// is a shard's window), on v1 the SENDING rows.
	// +optional
	Sending int64 `json:"sending"`

	// Retrying is the number of events waiting for their retry backoff (RETRY hold rows
	// on v2, RETRY rows on v1).
	// +optional
	Retrying int64 `json:"retrying"`

	// ExpiredLeases is what a worker took and lost without giving back (it died or
	// stalled; another worker takes it over): on a table of contract v2 the shards whose
	// lease ended without being released, on v1 the SENDING rows whose lease expired.
	// +optional
	ExpiredLeases int64 `json:"expiredLeases"`

	// Dead is the number of dead events still kept (DEAD hold rows on v2, DEAD rows on
	// v1); a DeadLetterReplay sends them again.
	// +optional
	Dead int64 `json:"dead"`

	// OldestPendingTime is the creation time of the oldest unpublished event (pending,
	// sending or retrying); now minus this is the publish lag. Empty when nothing waits.
	// +optional
	OldestPendingTime *metav1.Time `json:"oldestPendingTime,omitempty"`

	// LastPublishTime is when the relay last published an event: the newest batch log
	// row that published one on a table of contract v2, the newest sent_at on v1.
	// +optional
	LastPublishTime *metav1.Time `json:"lastPublishTime,omitempty"`

	// BrokerUnavailableWorkers is the number of relay workers reporting that they cannot
	// reach any Kafka broker (in <table>_workers; reports of workers silent for over a
	// minute are ignored). Such a worker has paused claiming until a broker answers
	// again: its rows keep their retry counts and nothing goes DEAD because of the outage.
	// Degraded is then True with reason BrokerUnavailable.
	// +optional
	BrokerUnavailableWorkers int32 `json:"brokerUnavailableWorkers"`

	// BrokerUnavailableSince is the earliest time (database clock) at which one of the
	// workers counted in brokerUnavailableWorkers lost its brokers; empty when no worker
	// reports the broker unreachable. `kubectl get -o wide` shows its age (BrokerDown).
	// +optional
	BrokerUnavailableSince *metav1.Time `json:"brokerUnavailableSince,omitempty"`

	// Replication is the logical-replication slot as PostgreSQL reports it
	// (pg_replication_slots), in LogicalReplication mode, and while a slot of a pipeline
	// that left that mode is still to be dropped.
	// +optional
	Replication *ReplicationStatus `json:"replication,omitempty"`

	// DeadLastIncreaseTime is when the operator last saw the DEAD count grow.
	// +optional
	DeadLastIncreaseTime *metav1.Time `json:"deadLastIncreaseTime,omitempty"`

	// LastCheckTime is when a read of the outbox table last found a change (a count, the
	// oldest pending or last publish time, the workers' broker reports), or the first
	// successful read. It is not refreshed while nothing changes, so an idle pipeline's
	// status is not rewritten: the time of the last read is the manager metric
	// outbox_pipeline_status_read_timestamp_seconds, and a failed read turns Ready
	// False (DatabaseUnreachable).
	// +optional
	LastCheckTime *metav1.Time `json:"lastCheckTime,omitempty"`

	// DeploymentName is the relay Deployment.
	// +optional
	DeploymentName string `json:"deploymentName,omitempty"`
}

// OutboxPipeline runs relay workers that publish the rows of a PostgreSQL outbox table
// to Kafka, at least once, in per-aggregate order, and reports lag and dead counts.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=obp;pipeline,categories=outbox
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Workers",type=string,JSONPath=`.status.workers`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pending`
// +kubebuilder:printcolumn:name="Oldest",type=date,JSONPath=`.status.oldestPendingTime`,description="Age of the oldest unpublished event"
// +kubebuilder:printcolumn:name="Retrying",type=integer,JSONPath=`.status.retrying`
// +kubebuilder:printcolumn:name="Dead",type=integer,JSONPath=`.status.dead`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="BrokerDown",type=date,JSONPath=`.status.brokerUnavailableSince`,priority=1,description="How long relay workers have reported no reachable Kafka broker"
// +kubebuilder:printcolumn:name="Table",type=string,JSONPath=`.spec.source.table`,priority=1
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.source.mode`,priority=1
// +kubebuilder:printcolumn:name="Shards",type=integer,JSONPath=`.status.tableShards`,priority=1,description="The v2 table's shard count: at most this many workers share it"
// +kubebuilder:printcolumn:name="Slot Lag",type=integer,JSONPath=`.status.replication.lagBytes`,priority=1,description="WAL bytes the replication slot holds back (LogicalReplication)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 50",message="metadata.name must be at most 50 characters (child object names and labels derive from it)"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must start with a letter and contain only lower-case letters, digits and '-' (it names a Service)"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec.source.contract) || oldSelf.spec.source.contract != 'v2' || (has(self.spec.source.contract) && self.spec.source.contract == 'v2') || (has(oldSelf.status) && has(oldSelf.status.tableContract) && oldSelf.status.tableContract == 'v1')",message="spec.source.contract cannot go back from v2 to v1 unless status.tableContract shows the table is still v1: a v2 table is never turned back into a v1 table"
type OutboxPipeline struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired pipeline.
	// +required
	Spec OutboxPipelineSpec `json:"spec"`

	// Status is observed by the operator.
	// +optional
	Status OutboxPipelineStatus `json:"status,omitempty"`
}

// OutboxPipelineList is a list of OutboxPipeline.
// +kubebuilder:object:root=true
type OutboxPipelineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the pipelines.
	Items []OutboxPipeline `json:"items"`
}

func init() {
	SchemeBuilder.Register(&OutboxPipeline{}, &OutboxPipelineList{})
}
