package config

import (
	"fmt"

	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// Table contracts `relayworker migrate --contract` creates (docs/contract-v2.md).
const (
	ContractV1 = "v1"
	ContractV2 = "v2"
)

// Migrate is the configuration of `relayworker migrate`.
type Migrate struct {
	Common
	NotifyTrigger bool
	// Contract is the contract asked for: ContractV1 (status columns, the claim ->
	// mark relay), ContractV2 (insert-only, shard cursors), or "" (not given: a new
	// table is created as v2, an existing table keeps the contract it follows).
	Contract string
	// Shards is a v2 table's fixed shard count (0: the default, 256, or the count
	// the table has).
	Shards int
}

func bindMigrate(b *binder, m *Migrate) {
	b.common(&m.Common)
	b.boolean(&m.NotifyTrigger, "notify-trigger", contract.EnvNotifyTrigger, false, "install a statement-level NOTIFY trigger for plain-SQL producers")
	b.str(&m.Contract, contract.FlagContract, contract.EnvContract, "",
		"table contract: v2 (insert-only table read by shard cursors; docs/contract-v2.md) creates a v2 table or upgrades a v1 one; "+
			"v1 creates or keeps a v1 table and refuses a v2 one; not given: a new table is created as v2 and an existing one keeps its contract")
	b.integer(&m.Shards, contract.FlagShards, contract.EnvShards, 0, "a v2 table's fixed shard count, a power of two (0: 256 for a new table, the table's own count for an existing one)")
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
	switch m.Contract {
	case ContractV1:
		if m.Shards != 0 {
			return nil, fmt.Errorf("--shards (%s) applies to --contract %s only", contract.EnvShards, ContractV2)
		}
	case ContractV2, "":
		if m.Shards != 0 {
			if err := schema.ValidShards(m.Shards); err != nil {
				return nil, fmt.Errorf("--shards (%s): %w", contract.EnvShards, err)
			}
		}
	default:
		return nil, fmt.Errorf("--contract (%s) %q must be %s or %s (or not given)", contract.EnvContract, m.Contract, ContractV1, ContractV2)
	}
	return m, nil
}
