package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/contract"
)

// Archive is the configuration of `relayworker archive`.
type Archive struct {
	Common
	SentRetention        time.Duration
	DeadRetention        time.Duration
	ConsumerLogRetention time.Duration // 0: leave the consumer log alone
	Mode                 string        // "archive" or "delete"
	BatchSize            int
	// Policy names the RetentionPolicy (<namespace>/<name>) in the run history, so the
	// operator can find this policy's newest run; empty for manual runs.
	Policy string
}

func bindArchive(b *binder, a *Archive) {
	b.common(&a.Common)
	b.duration(&a.SentRetention, contract.FlagSentRetention, "ARCHIVE_SENT_RETENTION", contract.DefaultSentRetention, "keep SENT rows at least this long after sent_at")
	b.duration(&a.DeadRetention, contract.FlagDeadRetention, "ARCHIVE_DEAD_RETENTION", contract.DefaultDeadRetention, "keep DEAD rows at least this long after they last changed")
	b.duration(&a.ConsumerLogRetention, contract.FlagConsumerLogRetention, "ARCHIVE_CONSUMER_LOG_RETENTION", 0, "keep finished message_consume rows at least this long (0: keep forever)")
	b.str(&a.Mode, contract.FlagMode, "ARCHIVE_MODE", contract.DefaultArchiveMode, "archive (move to <table>_archive) or delete")
	b.integer(&a.BatchSize, contract.FlagBatchSize, "ARCHIVE_BATCH_SIZE", contract.DefaultArchiveBatchSize, "rows per short transaction (1..50000)")
	b.str(&a.Policy, contract.FlagPolicy, "ARCHIVE_POLICY", "", "RetentionPolicy <namespace>/<name> recorded in <table>_archive_runs (empty: manual run)")
}

// ParseArchive parses `relayworker archive` arguments.
func ParseArchive(args []string, getenv Getenv) (*Archive, error) {
	b := newBinder("archive", getenv)
	a := &Archive{}
	bindArchive(b, a)
	if err := b.parse(args); err != nil {
		return nil, err
	}
	if err := a.validate(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Archive) validate() error {
	if err := a.Common.validate(); err != nil {
		return err
	}
	a.Mode = strings.ToLower(a.Mode)
	switch {
	case a.Mode != "archive" && a.Mode != "delete":
		return fmt.Errorf("--mode (ARCHIVE_MODE) %q must be archive or delete", a.Mode)
	case a.SentRetention < time.Hour:
		return fmt.Errorf("--sent-retention (ARCHIVE_SENT_RETENTION) %s must be at least 1h: consumers and replays rely on recent history", a.SentRetention)
	case a.DeadRetention < 24*time.Hour:
		return fmt.Errorf("--dead-retention (ARCHIVE_DEAD_RETENTION) %s must be at least 24h: dead events need a human first", a.DeadRetention)
	case a.ConsumerLogRetention != 0 && a.ConsumerLogRetention < time.Hour:
		return fmt.Errorf("--consumer-log-retention (ARCHIVE_CONSUMER_LOG_RETENTION) %s must be 0 or at least 1h: it is the consumers' dedup window", a.ConsumerLogRetention)
	case a.BatchSize < 1 || a.BatchSize > 50000:
		return fmt.Errorf("--batch-size (ARCHIVE_BATCH_SIZE) %d must be between 1 and 50000", a.BatchSize)
	case len(a.Policy) > 253:
		return fmt.Errorf("--policy (ARCHIVE_POLICY) is %d characters long; at most 253 (<namespace>/<name>)", len(a.Policy))
	}
	return nil
}
