// options.go: the one place where parsed flags and environment (internal/relayworker/config)
// become the work packages' Options. Each work package owns its configuration type
// and none of them reads flags, so a package's tests build its Options directly and a
// new flag is wired here, next to the others.

package cli

import (
	"github.com/outbox-operator/outbox-operator/inbox"
	"github.com/outbox-operator/outbox-operator/internal/backoff"
	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/archive"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/cdc"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/config"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/relay"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/replay"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardrelay"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"strings"
)

func migrateOptions(c *config.Migrate) schema.Options {
	return schema.Options{NotifyTrigger: c.NotifyTrigger}
}

func storeOptions(c *config.Common) store.Options { return store.Options{Table: c.T} }

// relayStoreOptions: in logical-replication mode polling leaves young PENDING rows to
// the slot's reader.
func relayStoreOptions(c *config.Relay) store.Options {
	o := storeOptions(&c.Common)
	if c.SourceMode == contract.SourceLogicalReplication {
		o.HandoverAfter = c.HandoverAfter
	}
	return o
}

// cdcOptions configure the logical-replication reader (the slot and publication names
// are final: replicationNames filled in any left empty).
func cdcOptions(c *config.Relay) cdc.Options {
	return cdc.Options{DSN: c.DSN, Table: c.T, Slot: c.Slot, Publication: c.Publication,
		Heartbeat: c.CDCHeartbeat, CreateSlot: c.CreateSlot, HandoverAfter: c.HandoverAfter}
}

// publishOptions: the Writer's batch follows the claim's batch size, so one claimed
// batch is one WriteMessages call per topic.
func publishOptions(c *config.Relay) publish.Options {
	return publish.Options{
		Brokers: c.Brokers, BatchSize: c.BatchSize,
		TLS: c.KafkaTLS, TLSCAFile: c.KafkaTLSCAFile,
		SASLMechanism: c.KafkaSASLMechanism, SASLUsername: c.KafkaSASLUsername, SASLPassword: c.KafkaSASLPassword,
	}
}

// relayOptions: the DSN is handed over for the LISTEN connection only; payloadType
// (the payload column's SQL type) picks the CloudEvents content-type.
func relayOptions(c *config.Relay, payloadType string) relay.Options {
	return relay.Options{
		Table: c.T, DSN: c.DSN, WorkerID: c.WorkerID, BatchSize: c.BatchSize,
		Lease: c.Lease, PollInterval: c.PollInterval, MaxAttempts: c.MaxAttempts,
		Backoff:           backoff.Policy{Min: c.MinBackoff, Max: c.MaxBackoff},
		UnknownTopicGrace: c.UnknownTopicGrace, ShutdownTimeout: c.ShutdownTimeout,
		Format: messageFormat(c, payloadType),
	}
}

// shardRelayOptions are relayOptions for the v2 relay (the same flags and meanings).
func shardRelayOptions(c *config.Relay, payloadType string) shardrelay.Options {
	o := relayOptions(c, payloadType)
	return shardrelay.Options{
		Table: o.Table, DSN: o.DSN, WorkerID: o.WorkerID, BatchSize: o.BatchSize,
		Lease: o.Lease, PollInterval: o.PollInterval, MaxAttempts: o.MaxAttempts, Backoff: o.Backoff,
		UnknownTopicGrace: o.UnknownTopicGrace, ShutdownTimeout: o.ShutdownTimeout, Format: o.Format,
	}
}

// messageFormat is the wire format of cfg for a payload column of payloadType.
func messageFormat(c *config.Relay, payloadType string) publish.Format {
	if c.MessageFormat != contract.FormatCloudEvents {
		return publish.Format{}
	}
	return publish.Format{CloudEvents: true, Source: c.CloudEventsSource, ContentType: publish.ContentTypeFor(payloadType)}
}

func replayOptions(c *config.Replay) replay.Options {
	return replay.Options{
		Table: c.T, ReplayID: c.ReplayID, Reason: c.Reason, RequestedBy: c.RequestedBy,
		Rate: c.Rate, CanarySize: c.CanarySize, MaxNewDeadPercent: c.MaxNewDeadPercent,
		DryRun: c.DryRun, MaxEvents: c.MaxEvents, SettleTimeout: c.SettleTimeout,
		Selector: replay.Selector(c.Selector),
	}
}

// archiveOptions: the DSN is handed over only to keep it out of the recorded errors.
func archiveOptions(c *config.Archive) archive.Options {
	return archive.Options{
		Table: c.T, SentRetention: c.SentRetention, DeadRetention: c.DeadRetention,
		ConsumerLogRetention: c.ConsumerLogRetention, Mode: c.Mode, BatchSize: c.BatchSize,
		Policy: c.Policy, DSN: c.DSN,
	}
}

// inboxReplayOptions: the parked-time window is inbox's Since/Until (first_seen_at),
// the replay id is the request's key (a re-run and the operator find the request by
// it), and names the requester when --requested-by is empty.
func inboxReplayOptions(c *config.InboxReplay) (inbox.ReplaySelector, inbox.ReplayOptions) {
	s := c.Selector
	sel := inbox.ReplaySelector{EventIDs: s.EventIDs, EventType: s.EventType, ErrorCode: s.ErrorCode}
	if s.ParkedAfter != nil {
		sel.Since = *s.ParkedAfter
	}
	if s.ParkedBefore != nil {
		sel.Until = *s.ParkedBefore
	}
	return sel, inbox.ReplayOptions{
		RequestedBy: requestedBy(c), Key: c.ReplayID, Reason: c.Reason,
		Rate: c.Rate, Limit: c.Limit,
	}
}

// requestedBy is --requested-by, or the DeadLetterReplay (its replay id) when the
// spec named nobody: inbox records who asked for every replay.
func requestedBy(c *config.InboxReplay) string {
	if strings.TrimSpace(c.RequestedBy) != "" {
		return c.RequestedBy
	}
	return "DeadLetterReplay " + c.ReplayID
}
