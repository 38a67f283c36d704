// Package contract is the worker contract written once (docs/worker-contract.md): the
// environment variables through which the operator configures `relayworker`, the
// defaults both sides assume, the ports and the binary's path. internal/relayworker/config binds
// its flags to these names and defaults, controllers render pods with them, and
// api/v1alpha1's defaults are these values; internal/controller/contract_test.go feeds what the
// operator renders into the worker's parsers, so the two sides cannot drift apart.
// It has no dependencies, so the worker binary stays free of Kubernetes packages.
package contract

import "time"

// Environment variables shared by every subcommand.
const (
	EnvDSN      = "OUTBOX_DSN"
	EnvSchema   = "OUTBOX_SCHEMA"
	EnvTable    = "OUTBOX_TABLE"
	EnvPipeline = "RELAY_PIPELINE"
	EnvLogLevel = "RELAY_LOG_LEVEL"
)

// Environment variables of `relayworker relay` (and OUTBOX_NOTIFY_TRIGGER of migrate).
const (
	EnvNotifyTrigger      = "OUTBOX_NOTIFY_TRIGGER"
	EnvContract           = "OUTBOX_CONTRACT"
	EnvShards             = "OUTBOX_SHARDS"
	EnvBrokers            = "KAFKA_BROKERS"
	EnvBatchSize          = "RELAY_BATCH_SIZE"
	EnvLease              = "RELAY_LEASE"
	EnvPollInterval       = "RELAY_POLL_INTERVAL"
	EnvMaxAttempts        = "RELAY_MAX_ATTEMPTS"
	EnvMinBackoff         = "RELAY_MIN_BACKOFF"
	EnvMaxBackoff         = "RELAY_MAX_BACKOFF"
	EnvUnknownTopicGrace  = "RELAY_UNKNOWN_TOPIC_GRACE"
	EnvShutdownTimeout    = "RELAY_SHUTDOWN_TIMEOUT"
	EnvWorkerID           = "RELAY_WORKER_ID"
	EnvMetricsAddr        = "RELAY_METRICS_ADDR"
	EnvHealthAddr         = "RELAY_HEALTH_ADDR"
	EnvPprofAddr          = "RELAY_PPROF_ADDR"
	EnvKafkaTLS           = "KAFKA_TLS"
	EnvKafkaTLSCAFile     = "KAFKA_TLS_CA_FILE"
	EnvKafkaSASLMechanism = "KAFKA_SASL_MECHANISM"
	EnvKafkaSASLUsername  = "KAFKA_SASL_USERNAME"
	EnvKafkaSASLPassword  = "KAFKA_SASL_PASSWORD"
	// EnvGoMemLimit is the Go runtime's soft memory limit; the operator sets it from the
	// relay container's memory limit (the relay raises GOGC, see internal/relayworker/cli).
	EnvGoMemLimit = "GOMEMLIMIT"
)

// Defaults of the worker's flags, which are also the CRD's defaults.
const (
	DefaultSchema            = "public"
	DefaultTable             = "outbox_event"
	DefaultLogLevel          = "info"
	DefaultBatchSize         = 500
	DefaultLease             = 30 * time.Second
	DefaultPollInterval      = time.Second
	DefaultMaxAttempts       = 12
	DefaultMinBackoff        = 500 * time.Millisecond
	DefaultMaxBackoff        = 5 * time.Minute
	DefaultUnknownTopicGrace = 5 * time.Minute
	DefaultShutdownTimeout   = 20 * time.Second
)

// Bounds the worker enforces (and the CRD's validation mirrors).
const (
	MinBatchSize = 1
	MaxBatchSize = 10000
	MinLease     = time.Second
)

// Where the worker listens in a pod, and where its binary is in the image.
const (
	MetricsPort = 8080
	HealthPort  = 8081
	Binary      = "/relayworker"
)

// Timings derived from the lease, used by the operator (pod spec) and the worker.

// TerminationGrace is the relay pod's terminationGracePeriodSeconds: a worker stops
// claiming on SIGTERM and finishes or releases its batch, so it gets the lease plus
// slack (at least 30 s) and in-flight rows are marked rather than left to expire.
func TerminationGrace(lease time.Duration) time.Duration {
	return max(lease.Truncate(time.Second)+15*time.Second, 30*time.Second)
}

// LivenessStall is how long the relay loop may go without progress before /healthz
// fails: a claim and publish may take up to the lease, an idle wait up to the poll
// interval (twice, for a slow claim after it), plus slack.
func LivenessStall(lease, poll time.Duration) time.Duration {
	return lease + 2*poll + 30*time.Second
}

// LeaseMargin is how long before its lease ends a batch must be published; rows not
// published by then are released instead of racing a take-over. inbox's command
// dispatcher ends its calls by the same rule.
func LeaseMargin(lease time.Duration) time.Duration { return lease / 4 }

// Flags of `relayworker replay` and `relayworker archive` that the operator renders as
// --flag=value (Arg).
const (
	FlagReplayID             = "replay-id"
	FlagReason               = "reason"
	FlagRequestedBy          = "requested-by"
	FlagRate                 = "rate"
	FlagCanarySize           = "canary-size"
	FlagMaxNewDeadPercent    = "max-new-dead-percent"
	FlagDryRun               = "dry-run"
	FlagEventIDs             = "event-ids"
	FlagEventType            = "event-type"
	FlagAggregateType        = "aggregate-type"
	FlagAggregateID          = "aggregate-id"
	FlagErrorCode            = "error-code"
	FlagDestination          = "destination"
	FlagCreatedAfter         = "created-after"
	FlagCreatedBefore        = "created-before"
	FlagPolicy               = "policy"
	FlagSentRetention        = "sent-retention"
	FlagDeadRetention        = "dead-retention"
	FlagMode                 = "mode"
	FlagBatchSize            = "batch-size"
	FlagConsumerLogRetention = "consumer-log-retention"
)

// Defaults of replay and archive, which are also the CRD's defaults.
const (
	DefaultReplayRate        = 100
	DefaultCanarySize        = 10
	DefaultMaxNewDeadPercent = 10
	DefaultSentRetention     = 168 * time.Hour
	DefaultDeadRetention     = 720 * time.Hour
	DefaultArchiveBatchSize  = 1000
	DefaultArchiveMode       = "archive"
)

// Flags of `relayworker migrate` the operator's migrate init container passes for a
// v2 pipeline. spec.source.shards has no default: the migrate's own (keep an existing
// table's count, internal/schema.DefaultShards for a new table) decides.
const (
	CommandMigrate = "migrate"
	FlagContract   = "contract"
	FlagShards     = "shards"
)

// The knobs of `migrate --contract v2` on a v1 table (docs/contract-v2.md, "As built:
// upgrading a v1 table"); the operator renders neither, and internal/schema has their
// defaults and bounds.
const (
	FlagUpgradeLockTimeout = "upgrade-lock-timeout"
	EnvUpgradeLockTimeout  = "OUTBOX_UPGRADE_LOCK_TIMEOUT"
	FlagUpgradeChunkRows   = "upgrade-chunk-rows"
	EnvUpgradeChunkRows    = "OUTBOX_UPGRADE_CHUNK_ROWS"
)

// Arg renders --flag=value: a value starting with '-' is never read as a flag.
func Arg(flag, value string) string { return "--" + flag + "=" + value }

// `relayworker inbox-replay`, which the DeadLetterReplay controller runs for a replay
// with spec.consumer: it asks the consumer group's running inbox.Consumer to replay
// parked messages (inbox.RequestReplay) and waits for the outcome. The consumer
// database's DSN comes only from EnvInboxDSN (a secretKeyRef), never from a flag: it is
// another database than the outbox's, so it has its own variable. --event-ids,
// --event-type, --error-code, --rate, --reason, --requested-by and --replay-id are the
// replay flags above; the parked-time window has flags of its own (it is first_seen_at,
// not created_at).
const (
	CommandInboxReplay = "inbox-replay"
	EnvInboxDSN        = "INBOX_DSN"
	FlagGroup          = "group"
	FlagSchema         = "schema"
	FlagLimit          = "limit"
	FlagParkedAfter    = "parked-after"
	FlagParkedBefore   = "parked-before"
	FlagWaitTimeout    = "wait-timeout"
	FlagPollInterval   = "poll-interval"
)

// Defaults and bounds of inbox-replay. The limit is inbox's own default; its maximum
// bounds what one consumer holds in memory for one replay (the selected messages with
// their payloads). The rate default is DefaultReplayRate, as for the outbox replay.
const (
	DefaultInboxReplayLimit  = 1000
	MaxInboxReplayLimit      = 10000
	MinInboxReplayRate       = 0.1 // inbox refuses slower replays (they would look abandoned)
	DefaultInboxWaitTimeout  = 30 * time.Minute
	DefaultInboxPollInterval = 2 * time.Second
	// MaxInboxReplayIDLen bounds --replay-id of inbox-replay, the key of the request
	// (inbox.ReplayOptions.Key, at most 200 bytes). A DeadLetterReplay's id
	// (namespace/name/uid) is at most 153.
	MaxInboxReplayIDLen = 160
)
