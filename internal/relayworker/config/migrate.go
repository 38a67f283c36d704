package config

import (
	"fmt"
	"strconv"
	"time"

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
	// Shards is a v2 table's fixed shard count (0: the count the table has, or
	// schema.DefaultShards for a new table).
	Shards int
	// UpgradeLockTimeout bounds an upgrade's wait for the v1 table's ACCESS EXCLUSIVE
	// lock, and a migrate's of an existing v2 table for its SHARE ROW EXCLUSIVE lock;
	// UpgradeChunkRows is how many v1 rows one copy statement scans (the copy
	// resumed by a later migrate without --contract v1 takes it too).
	UpgradeLockTimeout time.Duration
	UpgradeChunkRows   int
}

func bindMigrate(b *binder, m *Migrate) {
	b.common(&m.Common)
	b.boolean(&m.NotifyTrigger, "notify-trigger", contract.EnvNotifyTrigger, false, "install a statement-level NOTIFY trigger for plain-SQL producers")
	b.str(&m.Contract, contract.FlagContract, contract.EnvContract, "",
		"table contract: v2 (insert-only table read by shard cursors; docs/contract-v2.md) creates a v2 table or upgrades a v1 one; "+
			"v1 creates or keeps a v1 table and refuses a v2 one; not given: a new table is created as v2 and an existing one keeps its contract")
	b.integer(&m.Shards, contract.FlagShards, contract.EnvShards, 0, "a v2 table's fixed shard count, a power of two (0: "+strconv.Itoa(schema.DefaultShards)+" for a new table, the table's own count for an existing one)")
	b.duration(&m.UpgradeLockTimeout, contract.FlagUpgradeLockTimeout, contract.EnvUpgradeLockTimeout, schema.DefaultUpgradeLockTimeout,
		"how long migrate waits for the table's lock: ACCESS EXCLUSIVE to upgrade a v1 table (--contract v2), SHARE ROW EXCLUSIVE for the DDL of an existing v2 one (producers queue behind the wait)")
	b.integer(&m.UpgradeChunkRows, contract.FlagUpgradeChunkRows, contract.EnvUpgradeChunkRows, schema.DefaultUpgradeChunk,
		"upgrade from v1: v1 rows one copy statement scans (one transaction each; also when a later migrate resumes the copy)")
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
	if err := schema.ValidUpgradeLockTimeout(m.UpgradeLockTimeout); err != nil {
		return nil, fmt.Errorf("--%s (%s): %w", contract.FlagUpgradeLockTimeout, contract.EnvUpgradeLockTimeout, err)
	}
	if err := schema.ValidUpgradeChunk(m.UpgradeChunkRows); err != nil {
		return nil, fmt.Errorf("--%s (%s): %w", contract.FlagUpgradeChunkRows, contract.EnvUpgradeChunkRows, err)
	}
	return m, nil
}
