package config

import "github.com/outbox-operator/outbox-operator/internal/contract"

// Migrate is the configuration of `relayworker migrate`.
type Migrate struct {
	Common
	NotifyTrigger bool
}

func bindMigrate(b *binder, m *Migrate) {
	b.common(&m.Common)
	b.boolean(&m.NotifyTrigger, "notify-trigger", contract.EnvNotifyTrigger, false, "install a statement-level NOTIFY trigger for plain-SQL producers")
}

// ParseMigrate parses `relayworker migrate` arguments.
func ParseMigrate(args []string, getenv Getenv) (*Migrate, error) {
	b := newBinder("migrate", getenv)
	m := &Migrate{}
	bindMigrate(b, m)
	if err := b.parse(args); err != nil {
		return nil, err
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return m, nil
}
