package cli

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"time"

	"github.com/go-logr/logr"

	"github.com/outbox-operator/outbox-operator/inbox"
	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/pgerr"
	"github.com/outbox-operator/outbox-operator/internal/redact"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/config"
)

var inboxReplayCommand = command{
	name:    contract.CommandInboxReplay,
	summary: "ask a consumer group's running inbox consumer to replay parked messages, and wait",
	parse: func(args []string, getenv config.Getenv) (runner, error) {
		cfg, err := config.ParseInboxReplay(args, getenv)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, stderr io.Writer) error { return runInboxReplay(ctx, cfg, stderr) }, nil
	},
}

// statusReadTimeout bounds one progress read, so a database that hangs costs one
// poll, not the rest of the wait.
const statusReadTimeout = 10 * time.Second

// runInboxReplay records the replay request (or finds the one an earlier run of this
// replay id recorded) and waits until a consumer of the group has finished it. The
// work happens in the consumer, with its handler: this command only asks and watches.
func runInboxReplay(ctx context.Context, cfg *config.InboxReplay, stderr io.Writer) error {
	log := newLogger(stderr, cfg.LogLevel, "", "").WithValues("consumerGroup", cfg.Group)
	if cfg.ReplayID != "" {
		log = log.WithValues("requestKey", cfg.ReplayID)
	}
	db, err := openDB(ctx, cfg.DSN, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := requestOrResume(ctx, db, cfg, log)
	if err != nil {
		return err
	}
	if st.Selected == 0 && st.Status == inbox.ReplayRequested {
		log.Info("no parked message matches the selector; nothing to replay", "replayId", st.ReplayID)
		return nil
	}
	if st, err = waitForReplay(ctx, db, cfg, st, log); err != nil {
		return err
	}
	log.Info("replay finished", progress(st)...)
	if st.Failed > 0 {
		log.Info("some messages failed again and stay parked; see the consumer's log", "replayId", st.ReplayID, "failed", st.Failed)
	}
	return nil
}

// requestOrResume returns the state of this replay's request: the one an earlier run
// with the same --replay-id recorded (a retried Job must not ask twice), or a new one.
func requestOrResume(ctx context.Context, db *sql.DB, cfg *config.InboxReplay, log logr.Logger) (inbox.ReplayState, error) {
	if cfg.ReplayID != "" {
		st, found, err := inbox.FindReplay(ctx, db, cfg.Schema, cfg.Group, cfg.ReplayID)
		if err != nil {
			return st, inboxErr(cfg, err)
		}
		if found {
			log.Info("resuming the replay request of an earlier run", progress(st)...)
			return st, nil
		}
	}
	sel, opts := inboxReplayOptions(cfg)
	req, err := inbox.RequestReplay(ctx, db, cfg.Schema, cfg.Group, sel, opts)
	if err != nil {
		return inbox.ReplayState{}, inboxErr(cfg, err)
	}
	log.Info("replay requested", "replayId", req.ID, "selected", req.Selected)
	return inbox.ReplayState{ReplayResult: inbox.ReplayResult{ReplayID: req.ID, Selected: req.Selected}, Status: inbox.ReplayRequested}, nil
}

// waitForReplay reads the request every --poll-interval and logs its progress until
// it is DONE (nil), FAILED, the wait timeout passes or ctx ends (errors). A read that
// fails is logged and retried at the next poll.
func waitForReplay(ctx context.Context, db *sql.DB, cfg *config.InboxReplay, st inbox.ReplayState, log logr.Logger) (inbox.ReplayState, error) {
	deadline := time.NewTimer(cfg.WaitTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(cfg.PollInterval)
	defer tick.Stop()
	for {
		switch st.Status {
		case inbox.ReplayDone:
			return st, nil
		case inbox.ReplayFailed:
			return st, fmt.Errorf("consumer group %q failed replay %d after %d of %d messages: %s",
				cfg.Group, st.ReplayID, handled(st), st.Selected, redact.DSN(st.Error, cfg.DSN))
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("stopped while replay %d was %s (a re-run with the same --replay-id waits for it again): %w",
				st.ReplayID, st.Status, ctx.Err())
		case <-deadline.C:
			return st, waitTimeoutErr(cfg, st)
		case <-tick.C:
		}
		next, err := readStatus(ctx, db, cfg, st.ReplayID)
		if err != nil {
			log.Error(err, "could not read the replay's progress; retrying", "replayId", st.ReplayID)
			continue
		}
		st = next
		log.Info("replay progress", progress(st)...)
	}
}

func readStatus(ctx context.Context, db *sql.DB, cfg *config.InboxReplay, id int64) (inbox.ReplayState, error) {
	rctx, cancel := context.WithTimeout(ctx, statusReadTimeout)
	defer cancel()
	st, err := inbox.ReplayStatus(rctx, db, cfg.Schema, cfg.Group, id)
	if err != nil {
		return st, inboxErr(cfg, err)
	}
	return st, nil
}

// waitTimeoutErr says why the wait ended: nobody took the request, or the consumer
// is still at it (a replay at a low rate can outlast the wait).
func waitTimeoutErr(cfg *config.InboxReplay, st inbox.ReplayState) error {
	if st.Status == inbox.ReplayRequested {
		return fmt.Errorf("no consumer of group %q took replay request %d within %s: start a consumer of the group "+
			"(inbox.Consumer.Run serves requests every Options.ReplayPoll); the request stays REQUESTED and a consumer that starts later still serves it",
			cfg.Group, st.ReplayID, cfg.WaitTimeout)
	}
	return fmt.Errorf("replay %d of group %q is still %s after %s (%d of %d messages handled); the consumer goes on with it, "+
		"and a re-run with the same --replay-id waits for it again", st.ReplayID, cfg.Group, st.Status, cfg.WaitTimeout, handled(st), st.Selected)
}

// inboxErr names the likely fix of a missing table and keeps the DSN out of the text.
func inboxErr(cfg *config.InboxReplay, err error) error {
	if pgerr.IsUndefinedTable(err) {
		return fmt.Errorf("the inbox tables are missing in schema %q of the consumer database (the consumer creates them with inbox.Migrate): %s",
			cfg.Schema, redact.DSN(err.Error(), cfg.DSN))
	}
	return fmt.Errorf("replay of consumer group %q: %s", cfg.Group, redact.DSN(err.Error(), cfg.DSN))
}

func handled(st inbox.ReplayState) int { return st.Applied + st.Duplicates + st.Failed }

// progress is the replay's state under the stable log keys.
func progress(st inbox.ReplayState) []any {
	return []any{"replayId", st.ReplayID, "status", st.Status, "selected", st.Selected,
		"applied", st.Applied, "duplicates", st.Duplicates, "failed", st.Failed}
}
