package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/contract"
)

// Relay is the configuration of `relayworker relay`.
type Relay struct {
	Common
	Brokers           []string
	BatchSize         int
	Lease             time.Duration
	PollInterval      time.Duration
	MaxAttempts       int
	MinBackoff        time.Duration
	MaxBackoff        time.Duration
	UnknownTopicGrace time.Duration
	ShutdownTimeout   time.Duration
	WorkerID          string
	MetricsAddr       string
	HealthAddr        string
	// PprofAddr serves net/http/pprof (CPU, heap, block and mutex profiles); empty: off.
	PprofAddr string

	KafkaTLS           bool
	KafkaTLSCAFile     string
	KafkaSASLMechanism string
	KafkaSASLUsername  string
	KafkaSASLPassword  string

	// SourceMode is contract.SourcePolling or contract.SourceLogicalReplication: in the
	// latter, the worker holding the slot claims new rows as their inserts arrive
	// through logical replication, and polling takes only what it leaves (RETRY rows,
	// expired leases, PENDING rows older than HandoverAfter).
	SourceMode    string
	Slot          string
	Publication   string
	HandoverAfter time.Duration
	CDCHeartbeat  time.Duration
	CreateSlot    bool

	// MessageFormat is contract.FormatNative or contract.FormatCloudEvents
	// (docs/architecture.md, "Message contract").
	MessageFormat string
	// CloudEventsSource is ce_source in the CloudEvents format; empty: derived from
	// schema and table (CloudEventsSourceFor).
	CloudEventsSource string

	brokersRaw string
}

func bindRelay(b *binder, r *Relay) {
	b.common(&r.Common)
	b.str(&r.brokersRaw, "brokers", contract.EnvBrokers, "", "comma-separated host:port list")
	b.integer(&r.BatchSize, "batch-size", contract.EnvBatchSize, contract.DefaultBatchSize, "rows claimed per transaction (1..10000)")
	b.duration(&r.Lease, "lease", contract.EnvLease, contract.DefaultLease, "lease per claimed batch")
	b.duration(&r.PollInterval, "poll-interval", contract.EnvPollInterval, contract.DefaultPollInterval, "polling safety net")
	b.integer(&r.MaxAttempts, "max-attempts", contract.EnvMaxAttempts, contract.DefaultMaxAttempts, "attempts before a row goes DEAD")
	b.duration(&r.MinBackoff, "min-backoff", contract.EnvMinBackoff, contract.DefaultMinBackoff, "first retry delay")
	b.duration(&r.MaxBackoff, "max-backoff", contract.EnvMaxBackoff, contract.DefaultMaxBackoff, "cap of the retry delay")
	b.duration(&r.UnknownTopicGrace, "unknown-topic-grace", contract.EnvUnknownTopicGrace, contract.DefaultUnknownTopicGrace, "how long a missing topic is retried before DEAD")
	b.duration(&r.ShutdownTimeout, "shutdown-timeout", contract.EnvShutdownTimeout, contract.DefaultShutdownTimeout, "after SIGTERM, how long an in-flight publish may finish")
	host, _ := os.Hostname()
	b.str(&r.WorkerID, "worker-id", contract.EnvWorkerID, host, "identity in owner tokens and logs")
	b.str(&r.MetricsAddr, "metrics-addr", contract.EnvMetricsAddr, ":"+strconv.Itoa(contract.MetricsPort), "Prometheus /metrics listen address (empty: off)")
	b.str(&r.HealthAddr, "health-addr", contract.EnvHealthAddr, ":"+strconv.Itoa(contract.HealthPort), "/healthz and /readyz listen address (empty: off)")
	b.str(&r.PprofAddr, "pprof-addr", contract.EnvPprofAddr, "", "net/http/pprof listen address for profiling (empty: off; never expose it outside the pod)")
	b.boolean(&r.KafkaTLS, "kafka-tls", contract.EnvKafkaTLS, false, "use TLS to the brokers")
	b.str(&r.KafkaTLSCAFile, "kafka-tls-ca-file", contract.EnvKafkaTLSCAFile, "", "PEM CA bundle")
	b.str(&r.KafkaSASLMechanism, "kafka-sasl-mechanism", contract.EnvKafkaSASLMechanism, "", "plain, scram-sha-256 or scram-sha-512")
	b.str(&r.KafkaSASLUsername, "kafka-sasl-username", contract.EnvKafkaSASLUsername, "", "SASL user")
	b.str(&r.KafkaSASLPassword, "kafka-sasl-password", contract.EnvKafkaSASLPassword, "", "SASL password (never logged)")
	b.str(&r.SourceMode, "source-mode", contract.EnvSourceMode, contract.SourcePolling, "where new events come from: polling or logical-replication")
	b.str(&r.Slot, "slot", contract.EnvSlot, "", "logical replication slot (default: derived from database, schema and table)")
	b.str(&r.Publication, "publication", contract.EnvPublication, "", "publication of the outbox table's inserts (default: the slot's name)")
	b.duration(&r.HandoverAfter, "cdc-handover-after", contract.EnvHandoverAfter, contract.DefaultHandoverAfter, "logical-replication mode: age after which polling claims a PENDING row")
	b.duration(&r.CDCHeartbeat, "cdc-heartbeat", contract.EnvCDCHeartbeat, contract.DefaultCDCHeartbeat, "logical-replication mode: how often an idle reader moves its slot")
	b.str(&r.MessageFormat, "message-format", contract.EnvMessageFormat, contract.FormatNative, "wire format of the messages: native or cloudevents")
	b.str(&r.CloudEventsSource, "cloudevents-source", contract.EnvCloudEventsSource, "", "cloudevents format: ce_source (default /outbox-operator/<schema>/<table>)")
	b.boolean(&r.CreateSlot, "cdc-create-slot", contract.EnvCreateSlot, true, "logical-replication mode: make the slot and publication when missing (the operator sets false: it makes them)")
}

// ParseRelay parses `relayworker relay` arguments.
func ParseRelay(args []string, getenv Getenv) (*Relay, error) {
	b := newBinder("relay", getenv)
	r := &Relay{}
	bindRelay(b, r)
	if err := b.parse(args); err != nil {
		return nil, err
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// ParseBrokers splits and checks a host:port list.
func ParseBrokers(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("--brokers (KAFKA_BROKERS) is required")
	}
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("--brokers (KAFKA_BROKERS) %q has an empty entry", s)
		}
		host, port, err := net.SplitHostPort(part)
		if err != nil || host == "" {
			return nil, fmt.Errorf("--brokers (KAFKA_BROKERS) entry %q is not host:port", part)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("--brokers (KAFKA_BROKERS) entry %q has an invalid port", part)
		}
		out = append(out, part)
	}
	return out, nil
}

func (r *Relay) validate() error {
	if err := r.Common.validate(); err != nil {
		return err
	}
	brokers, err := ParseBrokers(r.brokersRaw)
	if err != nil {
		return err
	}
	r.Brokers = brokers
	if err := r.validateSource(); err != nil {
		return err
	}
	if err := r.validateFormat(); err != nil {
		return err
	}
	switch {
	case r.BatchSize < contract.MinBatchSize || r.BatchSize > contract.MaxBatchSize:
		return fmt.Errorf("--batch-size (RELAY_BATCH_SIZE) %d must be between %d and %d", r.BatchSize, contract.MinBatchSize, contract.MaxBatchSize)
	case r.PollInterval <= 0:
		return fmt.Errorf("--poll-interval (RELAY_POLL_INTERVAL) %s must be positive", r.PollInterval)
	case r.Lease <= r.PollInterval:
		return fmt.Errorf("--lease (RELAY_LEASE) %s must exceed --poll-interval %s", r.Lease, r.PollInterval)
	case r.Lease < contract.MinLease:
		return fmt.Errorf("--lease (RELAY_LEASE) %s must be at least %s", r.Lease, contract.MinLease)
	case r.MaxAttempts < 1:
		return fmt.Errorf("--max-attempts (RELAY_MAX_ATTEMPTS) %d must be at least 1", r.MaxAttempts)
	case r.MinBackoff <= 0:
		return fmt.Errorf("--min-backoff (RELAY_MIN_BACKOFF) %s must be positive", r.MinBackoff)
	case r.MaxBackoff < r.MinBackoff:
		return fmt.Errorf("--max-backoff (RELAY_MAX_BACKOFF) %s must be at least --min-backoff %s", r.MaxBackoff, r.MinBackoff)
	case r.UnknownTopicGrace < 0:
		return fmt.Errorf("--unknown-topic-grace (RELAY_UNKNOWN_TOPIC_GRACE) %s must not be negative", r.UnknownTopicGrace)
	case r.ShutdownTimeout <= 0:
		return fmt.Errorf("--shutdown-timeout (RELAY_SHUTDOWN_TIMEOUT) %s must be positive", r.ShutdownTimeout)
	case strings.TrimSpace(r.WorkerID) == "":
		return errors.New("--worker-id (RELAY_WORKER_ID) is empty and the hostname is unknown")
	}
	switch strings.ToLower(r.KafkaSASLMechanism) {
	case "":
	case "plain", "scram-sha-256", "scram-sha-512":
		r.KafkaSASLMechanism = strings.ToLower(r.KafkaSASLMechanism)
		if r.KafkaSASLUsername == "" {
			return errors.New("--kafka-sasl-username (KAFKA_SASL_USERNAME) is required with --kafka-sasl-mechanism")
		}
	default:
		return fmt.Errorf("--kafka-sasl-mechanism (KAFKA_SASL_MECHANISM) %q must be plain, scram-sha-256 or scram-sha-512", r.KafkaSASLMechanism)
	}
	if r.KafkaTLSCAFile != "" {
		if _, err := os.Stat(r.KafkaTLSCAFile); err != nil {
			return fmt.Errorf("--kafka-tls-ca-file (KAFKA_TLS_CA_FILE): %v", err)
		}
	}
	return nil
}

// validateSource checks the source mode and, for logical replication, the names of
// the slot and publication (they are spliced into replication commands as
// identifiers, so only PostgreSQL's slot-name alphabet passes).
func (r *Relay) validateSource() error {
	switch r.SourceMode {
	case contract.SourcePolling:
		return nil
	case contract.SourceLogicalReplication:
	default:
		return fmt.Errorf("--source-mode (%s) %q must be %s or %s", contract.EnvSourceMode, r.SourceMode,
			contract.SourcePolling, contract.SourceLogicalReplication)
	}
	// Empty names are derived once the database is known (slots are per server, so the
	// database name is part of them: cli.replicationNames).
	for flag, v := range map[string]string{"--slot (" + contract.EnvSlot + ")": r.Slot, "--publication (" + contract.EnvPublication + ")": r.Publication} {
		if v != "" && !contract.ReplicationNameRE.MatchString(v) {
			return fmt.Errorf("%s %q must be 1 to 63 lower-case letters, digits or underscores", flag, v)
		}
	}
	switch {
	case r.HandoverAfter <= 0:
		return fmt.Errorf("--cdc-handover-after (%s) %s must be positive", contract.EnvHandoverAfter, r.HandoverAfter)
	case r.CDCHeartbeat <= 0:
		return fmt.Errorf("--cdc-heartbeat (%s) %s must be positive", contract.EnvCDCHeartbeat, r.CDCHeartbeat)
	}
	return nil
}

// validateFormat checks the message format and fills in the default ce_source.
func (r *Relay) validateFormat() error {
	switch r.MessageFormat {
	case contract.FormatNative, contract.FormatCloudEvents:
	default:
		return fmt.Errorf("--message-format (%s) %q must be %s or %s", contract.EnvMessageFormat, r.MessageFormat,
			contract.FormatNative, contract.FormatCloudEvents)
	}
	if r.CloudEventsSource == "" {
		r.CloudEventsSource = contract.CloudEventsSourceFor(r.T.Schema, r.T.Name)
		return nil
	}
	if _, err := url.Parse(r.CloudEventsSource); err != nil || strings.TrimSpace(r.CloudEventsSource) != r.CloudEventsSource {
		return fmt.Errorf("--cloudevents-source (%s) %q is not a URI reference", contract.EnvCloudEventsSource, r.CloudEventsSource)
	}
	return nil
}
