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
	log.Info("outbox table migrated", "table", cfg.T.String(), "notifyTrigger", cfg.NotifyTrigger)
	return nil
}

// migrateContract says which migrate to run: the v2 one with a shard count (0: the
// default), or the v1 one (-1). --contract v1, the default (and what the operator's
// migrate init container passes), on a table that follows v2 already migrates it as
// v2 with its own shard count: after an upgrade the init container would otherwise
// run v1's DDL on the v2 table (it fails on the missing status column, and the pod
// with it), and an upgrade that was interrupted is resumed by whichever migrate runs
// next. A table is never turned back into v1.
func migrateContract(ctx context.Context, db *sql.DB, cfg *config.Migrate, log logr.Logger) (int, error) {
	if cfg.Contract == config.ContractV2 {
		return cfg.Shards, nil
	}
	c, err := schema.DetectContract(ctx, db, cfg.T)
	if err != nil {
		return 0, err
	}
	if c.Version < schema.ContractV2 {
		return -1, nil
	}
	log.Info("outbox table follows contract v2: migrating it as v2 (--contract v1 applies to new tables)", "table", cfg.T.String(), "shards", c.Shards)
	return c.Shards, nil
}
