package cli

import (
	"context"
	"database/sql"
	"fmt"
	"io"

	"github.com/go-logr/logr"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/config"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

var migrateCommand = command{
	name:    "migrate",
	summary: "create or complete the outbox table, indexes and side tables (idempotent)",
	parse: func(args []string, getenv config.Getenv) (runner, error) {
		cfg, err := config.ParseMigrate(args, getenv)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, stderr io.Writer) error {
			return migrate(ctx, cfg, newLogger(stderr, cfg.LogLevel, cfg.Pipeline, ""))
		}, nil
	},
}

// migrate runs the idempotent DDL (schema.Migrate) on the primary.
func migrate(ctx context.Context, cfg *config.Migrate, log logr.Logger) error {
	db, err := openDB(ctx, cfg.DSN, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := store.CheckPrimary(ctx, db); err != nil {
		return err
	}
	shards, err := migrateContract(ctx, db, cfg, log)
	if err != nil {
		return err
	}
	if shards >= 0 {
		if err := schema.MigrateV2(ctx, db, cfg.T, schema.V2Options{Shards: shards,
			UpgradeChunk: cfg.UpgradeChunkRows, UpgradeLockTimeout: cfg.UpgradeLockTimeout}); err != nil {
			return err
		}
		if cfg.NotifyTrigger {
			for _, stmt := range schema.NotifyTriggerStatements(cfg.T) {
				if _, err := db.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("migrate %s: notify trigger: %w", cfg.T, err)
				}
			}
		}
		log.Info("outbox table migrated", "table", cfg.T.String(), "contract", config.ContractV2, "notifyTrigger", cfg.NotifyTrigger)
		// An upgrade from v1 (docs/contract-v2.md): say where the v1 rows went.
		if u, err := schema.UpgradeState(ctx, db, cfg.T); err == nil && u.From != "" {
			log.Info("upgraded from contract v1", "table", cfg.T.String(), "v1Table", u.From, "state", u.State,
				"copiedToHold", u.Copied, "dead", u.Dead)
		}
		return nil
	}
	if err := schema.Migrate(ctx, db, cfg.T, migrateOptions(cfg)); err != nil {
		return err
	}
	log.Info("outbox table migrated", "table", cfg.T.String(), "contract", config.ContractV1, "notifyTrigger", cfg.NotifyTrigger)
	return nil
}

// migrateContract says which migrate to run: the v2 one with --shards (0: MigrateV2
// keeps an existing v2 table's count and gives a new one schema.DefaultShards), or
// the v1 one (-1). Without --contract a new table is created as v2 and an existing
// table keeps the contract it follows (a v1 table is told how to upgrade); an upgrade
// that was interrupted is resumed by the next migrate that runs v2's. --contract v2
// creates or upgrades. --contract v1 (the init container of a v1 pipeline) creates
// or keeps a v1 table and refuses a v2 one: a v2 table is never turned back into v1,
// and a pipeline that says v1 on it is a mistake to show, not to run through.
func migrateContract(ctx context.Context, db *sql.DB, cfg *config.Migrate, log logr.Logger) (int, error) {
	if cfg.Contract == config.ContractV2 {
		return cfg.Shards, nil
	}
	c, err := schema.DetectContract(ctx, db, cfg.T)
	if err != nil {
		return 0, err
	}
	switch {
	case cfg.Contract == config.ContractV1 && c.Version >= schema.ContractV2:
		return 0, fmt.Errorf("outbox table %s follows contract v2 and --contract v1 would turn it back into v1 (refused: run migrate with --contract v2 or without --contract, and set spec.source.contract: v2 on its pipeline)", cfg.T)
	case cfg.Contract == config.ContractV1:
		return -1, nil
	case c.Version == schema.ContractV1 && cfg.Shards != 0:
		return 0, fmt.Errorf("outbox table %s follows contract v1, which has no shards: add --contract v2 to upgrade it to v2 with --shards %d", cfg.T, cfg.Shards)
	case c.Version == schema.ContractV1:
		log.Info("outbox table follows contract v1: migrating it as v1 (upgrade it to contract v2 with `relayworker migrate --contract v2`, docs/operations.md)", "table", cfg.T.String())
		return -1, nil
	}
	return cfg.Shards, nil // no table, or a v2 one
}
