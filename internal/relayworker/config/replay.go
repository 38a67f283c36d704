package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/contract"
)

// ReplaySelector chooses DEAD rows; empty fields do not filter. internal/relayworker/cli
// converts it to replay.Selector, whose JSON the audit table records; the conversion
// only compiles while both have the same fields.
type ReplaySelector struct {
	EventIDs      []string
	EventType     string
	AggregateType string
	AggregateID   string
	ErrorCode     string
	Destination   string
	CreatedAfter  *time.Time
	CreatedBefore *time.Time
}

// Empty reports whether the selector would match every DEAD row.
func (s ReplaySelector) Empty() bool {
	return len(s.EventIDs) == 0 && s.EventType == "" && s.AggregateType == "" && s.AggregateID == "" &&
		s.ErrorCode == "" && s.Destination == "" && s.CreatedAfter == nil && s.CreatedBefore == nil
}

// Replay is the configuration of `relayworker replay`.
type Replay struct {
	Common
	ReplayID          string
	Reason            string
	RequestedBy       string
	Rate              int
	CanarySize        int
	MaxNewDeadPercent int
	DryRun            bool
	MaxEvents         int
	SettleTimeout     time.Duration
	Selector          ReplaySelector

	eventIDsRaw, afterRaw, beforeRaw string
}

func bindReplay(b *binder, r *Replay) {
	b.common(&r.Common)
	b.str(&r.ReplayID, contract.FlagReplayID, "REPLAY_ID", "", "unique id of this replay (audit key; a re-run resumes it)")
	b.str(&r.Reason, contract.FlagReason, "REPLAY_REASON", "", "why the replay runs (audited)")
	b.str(&r.RequestedBy, contract.FlagRequestedBy, "REPLAY_REQUESTED_BY", "unknown", "who asked for it (audited)")
	b.integer(&r.Rate, contract.FlagRate, "REPLAY_RATE", contract.DefaultReplayRate, "events handed back to the relay per second (1..10000)")
	b.integer(&r.CanarySize, contract.FlagCanarySize, "REPLAY_CANARY_SIZE", contract.DefaultCanarySize, "events replayed first; 0 disables the canary")
	b.integer(&r.MaxNewDeadPercent, contract.FlagMaxNewDeadPercent, "REPLAY_MAX_NEW_DEAD_PERCENT", contract.DefaultMaxNewDeadPercent, "stop when more than this % of the canary goes DEAD again")
	b.boolean(&r.DryRun, contract.FlagDryRun, "REPLAY_DRY_RUN", false, "only count and audit the matching events")
	b.integer(&r.MaxEvents, "max-events", "REPLAY_MAX_EVENTS", 100000, "refuse selectors matching more DEAD events than this")
	b.duration(&r.SettleTimeout, "settle-timeout", "REPLAY_SETTLE_TIMEOUT", 30*time.Minute, "how long replayed events may take to become SENT or DEAD")
	b.str(&r.eventIDsRaw, contract.FlagEventIDs, "REPLAY_EVENT_IDS", "", "comma-separated event ids")
	b.str(&r.Selector.EventType, contract.FlagEventType, "REPLAY_EVENT_TYPE", "", "event_type to match")
	b.str(&r.Selector.AggregateType, contract.FlagAggregateType, "REPLAY_AGGREGATE_TYPE", "", "aggregate_type to match")
	b.str(&r.Selector.AggregateID, contract.FlagAggregateID, "REPLAY_AGGREGATE_ID", "", "aggregate_id to match")
	b.str(&r.Selector.ErrorCode, contract.FlagErrorCode, "REPLAY_ERROR_CODE", "", "last_error_code to match")
	b.str(&r.Selector.Destination, contract.FlagDestination, "REPLAY_DESTINATION", "", "destination (topic) to match")
	b.str(&r.afterRaw, contract.FlagCreatedAfter, "REPLAY_CREATED_AFTER", "", "RFC 3339 time; match created_at >= it")
	b.str(&r.beforeRaw, contract.FlagCreatedBefore, "REPLAY_CREATED_BEFORE", "", "RFC 3339 time; match created_at < it")
}

// ParseReplay parses `relayworker replay` arguments.
func ParseReplay(args []string, getenv Getenv) (*Replay, error) {
	b := newBinder("replay", getenv)
	r := &Replay{}
	bindReplay(b, r)
	if err := b.parse(args); err != nil {
		return nil, err
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Replay) validate() error {
	if err := r.Common.validate(); err != nil {
		return err
	}
	var err error
	if r.Selector.EventIDs, err = splitList(r.eventIDsRaw, "--event-ids (REPLAY_EVENT_IDS)"); err != nil {
		return err
	}
	if r.Selector.CreatedAfter, err = parseTime(r.afterRaw, "--created-after"); err != nil {
		return err
	}
	if r.Selector.CreatedBefore, err = parseTime(r.beforeRaw, "--created-before"); err != nil {
		return err
	}
	s := r.Selector
	switch {
	case strings.TrimSpace(r.ReplayID) == "":
		return errors.New("--replay-id (REPLAY_ID) is required")
	case len(strings.TrimSpace(r.Reason)) < 3:
		return errors.New("--reason (REPLAY_REASON) is required: say what was fixed")
	case r.Rate < 1 || r.Rate > 10000:
		return fmt.Errorf("--rate (REPLAY_RATE) %d must be between 1 and 10000", r.Rate)
	case r.CanarySize < 0:
		return fmt.Errorf("--canary-size (REPLAY_CANARY_SIZE) %d must not be negative", r.CanarySize)
	case r.MaxNewDeadPercent < 0 || r.MaxNewDeadPercent > 100:
		return fmt.Errorf("--max-new-dead-percent (REPLAY_MAX_NEW_DEAD_PERCENT) %d must be between 0 and 100", r.MaxNewDeadPercent)
	case r.MaxEvents < 1:
		return fmt.Errorf("--max-events (REPLAY_MAX_EVENTS) %d must be at least 1", r.MaxEvents)
	case r.SettleTimeout <= 0:
		return fmt.Errorf("--settle-timeout (REPLAY_SETTLE_TIMEOUT) %s must be positive", r.SettleTimeout)
	case s.Empty():
		return errors.New("replay selector is empty: set at least one of --event-ids, --event-type, --aggregate-type, --aggregate-id, --error-code, --destination, --created-after, --created-before")
	case s.AggregateID != "" && s.AggregateType == "":
		return errors.New("--aggregate-id needs --aggregate-type")
	case s.CreatedAfter != nil && s.CreatedBefore != nil && !s.CreatedAfter.Before(*s.CreatedBefore):
		return errors.New("--created-after must be before --created-before")
	}
	return nil
}
