package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/archive"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/config"
)

var archiveCommand = command{
	name:    "archive",
	summary: "archive or delete old SENT/DEAD rows and consumer-log rows",
	parse: func(args []string, getenv config.Getenv) (runner, error) {
		cfg, err := config.ParseArchive(args, getenv)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, stderr io.Writer) error { return runArchive(ctx, cfg, stderr) }, nil
	},
}

// runArchive runs one retention pass (a CronJob of the RetentionPolicy controller).
func runArchive(ctx context.Context, cfg *config.Archive, stderr io.Writer) error {
	log := newLogger(stderr, cfg.LogLevel, cfg.Pipeline, "")
	db, err := openDB(ctx, cfg.DSN, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := archive.Run(ctx, db, archiveOptions(cfg), log)
	if err != nil {
		return err
	}
	log.Info("archive finished", "result", fmt.Sprintf("%+v", res))
	return nil
}
