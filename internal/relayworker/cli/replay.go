package cli

import (
	"context"
	"io"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/config"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/replay"
)

var replayCommand = command{
	name:    "replay",
	summary: "hand selected DEAD events back to the relay (audited, rate-limited)",
	parse: func(args []string, getenv config.Getenv) (runner, error) {
		cfg, err := config.ParseReplay(args, getenv)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, stderr io.Writer) error { return runReplay(ctx, cfg, stderr) }, nil
	},
}

// runReplay runs one replay (a Job of the DeadLetterReplay controller).
func runReplay(ctx context.Context, cfg *config.Replay, stderr io.Writer) error {
	log := newLogger(stderr, cfg.LogLevel, cfg.Pipeline, "")
	db, err := openDB(ctx, cfg.DSN, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := (&replay.Replayer{DB: db, Opts: replayOptions(cfg), Log: log}).Run(ctx)
	if err != nil {
		return err
	}
	log.Info("replay finished", "phase", res.Phase, "matched", res.Matched, "replayed", res.Replayed,
		"succeeded", res.Succeeded, "deadAgain", res.DeadAgain)
	return nil
}
