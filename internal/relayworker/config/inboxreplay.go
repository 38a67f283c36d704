package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// InboxSelector chooses a consumer group's parked messages; empty fields do not
// filter. internal/relayworker/cli converts it to inbox.ReplaySelector.
type InboxSelector struct {
	EventIDs     []string
	EventType    string
	ErrorCode    string
	ParkedAfter  *time.Time // first_seen_at >= it
	ParkedBefore *time.Time // first_seen_at < it
}

// Empty reports whether the selector would take every parked message.
func (s InboxSelector) Empty() bool {
	return len(s.EventIDs) == 0 && s.EventType == "" && s.ErrorCode == "" && s.ParkedAfter == nil && s.ParkedBefore == nil
}

// InboxReplay is the configuration of `relayworker inbox-replay`.
type InboxReplay struct {
	// DSN of the consumer database, from INBOX_DSN only: a flag would put it in the
	// pod spec and in `ps` output.
	DSN          string
	Schema       string
	Group        string
	LogLevel     string
	ReplayID     string // the DeadLetterReplay's id: a re-run resumes its request
	Reason       string
	RequestedBy  string
	Rate         float64
	Limit        int
	Selector     InboxSelector
	WaitTimeout  time.Duration
	PollInterval time.Duration

	eventIDsRaw, afterRaw, beforeRaw string
}

// inboxReplayEnvUsage ends `inbox-replay -h`: the one input that is not a flag.
const inboxReplayEnvUsage = `
environment:
  ` + contract.EnvInboxDSN + `	lib/pq DSN of the consumer database (required; never a flag, never logged)
`

func bindInboxReplay(b *binder, r *InboxReplay) {
	r.DSN, _ = b.getenv(contract.EnvInboxDSN)
	b.str(&r.Group, contract.FlagGroup, "INBOX_GROUP", "", "consumer group whose parked messages are replayed (required)")
	b.str(&r.Schema, contract.FlagSchema, "INBOX_SCHEMA", contract.DefaultSchema, "schema of the inbox tables")
	b.str(&r.LogLevel, "log-level", contract.EnvLogLevel, contract.DefaultLogLevel, "debug, info or error")
	b.str(&r.ReplayID, contract.FlagReplayID, "REPLAY_ID", "", "id of this replay (leads requested_by; a re-run with the same id resumes its request)")
	b.str(&r.Reason, contract.FlagReason, "REPLAY_REASON", "", "why the replay runs (recorded)")
	b.str(&r.RequestedBy, contract.FlagRequestedBy, "REPLAY_REQUESTED_BY", "unknown", "who asked for it (recorded)")
	b.number(&r.Rate, contract.FlagRate, "REPLAY_RATE", contract.DefaultReplayRate, "messages the consumer handles per second (0.1..10000)")
	b.integer(&r.Limit, contract.FlagLimit, "REPLAY_LIMIT", contract.DefaultInboxReplayLimit, "at most this many parked messages, oldest first (1..10000)")
	b.duration(&r.WaitTimeout, contract.FlagWaitTimeout, "REPLAY_WAIT_TIMEOUT", contract.DefaultInboxWaitTimeout, "how long to wait for a consumer of the group to finish the replay")
	b.duration(&r.PollInterval, contract.FlagPollInterval, "REPLAY_POLL_INTERVAL", contract.DefaultInboxPollInterval, "how often the replay's progress is read and logged")
	b.str(&r.eventIDsRaw, contract.FlagEventIDs, "REPLAY_EVENT_IDS", "", "comma-separated event ids")
	b.str(&r.Selector.EventType, contract.FlagEventType, "REPLAY_EVENT_TYPE", "", "event_type to match")
	b.str(&r.Selector.ErrorCode, contract.FlagErrorCode, "REPLAY_ERROR_CODE", "", "park code (error_code) to match")
	b.str(&r.afterRaw, contract.FlagParkedAfter, "REPLAY_PARKED_AFTER", "", "RFC 3339 time; match first_seen_at >= it")
	b.str(&r.beforeRaw, contract.FlagParkedBefore, "REPLAY_PARKED_BEFORE", "", "RFC 3339 time; match first_seen_at < it")
}

// ParseInboxReplay parses `relayworker inbox-replay` arguments.
func ParseInboxReplay(args []string, getenv Getenv) (*InboxReplay, error) {
	b := newBinder(contract.CommandInboxReplay, getenv)
	r := &InboxReplay{}
	bindInboxReplay(b, r)
	if err := b.parse(args); err != nil {
		return nil, err
	}
	if err := r.parseSelector(); err != nil {
		return nil, err
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *InboxReplay) parseSelector() error {
	ids, err := splitList(r.eventIDsRaw, "--event-ids (REPLAY_EVENT_IDS)")
	if err != nil {
		return err
	}
	r.Selector.EventIDs = ids
	if r.Selector.ParkedAfter, err = parseTime(r.afterRaw, "--"+contract.FlagParkedAfter); err != nil {
		return err
	}
	r.Selector.ParkedBefore, err = parseTime(r.beforeRaw, "--"+contract.FlagParkedBefore)
	return err
}

func (r *InboxReplay) validate() error {
	if err := r.validateTarget(); err != nil {
		return err
	}
	s := r.Selector
	switch {
	case len(r.ReplayID) > contract.MaxInboxReplayIDLen:
		return fmt.Errorf("--replay-id (REPLAY_ID) is longer than %d bytes", contract.MaxInboxReplayIDLen)
	case len(strings.TrimSpace(r.Reason)) < 3:
		return errors.New("--reason (REPLAY_REASON) is required: say what was fixed")
	case strings.TrimSpace(r.RequestedBy) == "" && r.ReplayID == "":
		return errors.New("--requested-by (REPLAY_REQUESTED_BY) must not be empty")
	case r.Rate < contract.MinInboxReplayRate || r.Rate > 10000:
		return fmt.Errorf("--rate (REPLAY_RATE) %g must be between %g and 10000", r.Rate, contract.MinInboxReplayRate)
	case r.Limit < 1 || r.Limit > contract.MaxInboxReplayLimit:
		return fmt.Errorf("--limit (REPLAY_LIMIT) %d must be between 1 and %d", r.Limit, contract.MaxInboxReplayLimit)
	case r.WaitTimeout <= 0 || r.PollInterval <= 0:
		return errors.New("--wait-timeout and --poll-interval must be positive")
	case s.Empty():
		return errors.New("replay selector is empty: set at least one of --event-ids, --event-type, --error-code, --parked-after, --parked-before")
	case s.ParkedAfter != nil && s.ParkedBefore != nil && !s.ParkedAfter.Before(*s.ParkedBefore):
		return errors.New("--parked-after must be before --parked-before")
	}
	return nil
}

// validateTarget checks where the replay goes: database, schema, group, log level.
func (r *InboxReplay) validateTarget() error {
	if strings.TrimSpace(r.DSN) == "" {
		return errors.New(contract.EnvInboxDSN + " (the consumer database's DSN) is required; it is read from the environment only")
	}
	if err := pgident.Validate("schema", r.Schema); err != nil {
		return fmt.Errorf("--schema (INBOX_SCHEMA): %w", err)
	}
	if strings.TrimSpace(r.Group) == "" {
		return errors.New("--group (INBOX_GROUP) is required")
	}
	switch r.LogLevel {
	case "debug", "info", "error":
		return nil
	}
	return fmt.Errorf("--log-level (RELAY_LOG_LEVEL) %q must be debug, info or error", r.LogLevel)
}

// splitList splits a comma-separated flag value; an empty entry is an error.
func splitList(raw, what string) ([]string, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var out []string
	for _, v := range strings.Split(raw, ",") {
		if v = strings.TrimSpace(v); v == "" {
			return nil, fmt.Errorf("%s %q has an empty entry", what, raw)
		}
		out = append(out, v)
	}
	return out, nil
}

// parseTime parses an optional RFC 3339 flag value.
func parseTime(raw, flag string) (*time.Time, error) {
	if raw == "" {
		return nil, nil
	}
	v, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return nil, fmt.Errorf("%s %q is not an RFC 3339 time (e.g. 2026-11-30T10:00:00Z)", flag, raw)
	}
	return &v, nil
}
