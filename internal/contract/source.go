package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Environment variables of `relayworker relay` that choose where new events come
// from (docs/worker-contract.md, "Source modes").
const (
	EnvSourceMode    = "OUTBOX_SOURCE_MODE"
	EnvSlot          = "OUTBOX_REPLICATION_SLOT"
	EnvPublication   = "OUTBOX_PUBLICATION"
	EnvHandoverAfter = "RELAY_CDC_HANDOVER_AFTER"
	EnvCDCHeartbeat  = "RELAY_CDC_HEARTBEAT"
	// EnvCreateSlot: whether the worker makes the slot and publication itself (true by
	// default, for a worker run by hand). The operator sets it false: it makes and
	// drops them, so a worker shutting down cannot re-create a dropped slot.
	EnvCreateSlot = "RELAY_CDC_CREATE_SLOT"
)

// Source modes of the relay, as the worker spells them (the CRD says Polling and
// LogicalReplication).
const (
	SourcePolling            = "polling"
	SourceLogicalReplication = "logical-replication"
)

// Defaults of logical-replication mode.
const (
	// DefaultHandoverAfter is how old a PENDING row must be before the polling path
	// claims it in logical-replication mode: the slot's reader claims new rows within
	// milliseconds, so a row still PENDING after this was skipped (its aggregate had an
	// older version in flight), missed (the reader was down, the slot was lost) or is
	// the reader's, late; either way, polling takes it.
	DefaultHandoverAfter = 5 * time.Second
	// DefaultCDCHeartbeat is how often an idle reader writes a logical message into the
	// WAL so that its slot's confirmed position keeps moving.
	DefaultCDCHeartbeat = 10 * time.Second
)

// ReplicationNameRE is what the worker accepts as a slot or publication name:
// PostgreSQL's slot name rule (lower-case letters, digits, underscore; at most 63).
var ReplicationNameRE = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// ReplicationName is the slot and publication name for a pipeline, from its
// identifying parts (the operator passes namespace and name; the worker, without
// them, schema and table): readable, valid, unique, and at most 63 bytes.
func ReplicationName(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "/")))
	var b strings.Builder
	b.WriteString("outbox_")
	for _, r := range strings.ToLower(strings.Join(parts, "_")) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	readable := b.String()
	if len(readable) > 54 {
		readable = readable[:54]
	}
	return readable + "_" + hex.EncodeToString(sum[:4])
}

// Environment variables of `relayworker relay` that choose the wire format of the
// messages (docs/worker-contract.md, "relay flags"; docs/architecture.md, "Message
// contract").
const (
	EnvMessageFormat     = "OUTBOX_MESSAGE_FORMAT"
	EnvCloudEventsSource = "OUTBOX_CLOUDEVENTS_SOURCE"
)

// Message formats, as the worker spells them (the CRD says Native and CloudEvents).
const (
	FormatNative      = "native"
	FormatCloudEvents = "cloudevents"
)

// CloudEventsSource is the ce_source of a pipeline: a URI reference naming it, after
// Debezium's CloudEvents converter (/debezium/<connector>/<server name>). The operator
// passes namespace and name; a worker run by hand, without them, schema and table.
func CloudEventsSourceFor(parts ...string) string {
	var b strings.Builder
	b.WriteString("/outbox-operator")
	for _, p := range parts {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(p))
	}
	return b.String()
}
