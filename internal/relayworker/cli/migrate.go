package cli

import (
	"context"
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
	if cfg.Contract == config.ContractV2 {
		if err := schema.MigrateV2(ctx, db, cfg.T, schema.V2Options{Shards: cfg.Shards}); err != nil {
			return err
		}
		if cfg.NotifyTrigger {
			for _, stmt := range schema.NotifyTriggerStatements(cfg.T) {
				if _, err := db.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("migrate %s: notify trigger: %w", cfg.T, err)
				}
			}
		}
		log.Info("outbox table migrated", "table", cfg.T.String(), "contract", cfg.Contract, "notifyTrigger", cfg.NotifyTrigger)
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
