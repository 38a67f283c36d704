// Package cli wires the relayworker subcommands: configuration, database and broker
// connections, the HTTP endpoints and the relay loop. cmd/relayworker only maps the
// returned error to an exit code.
package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	_ "github.com/lib/pq" // driver "postgres"

	"github.com/outbox-operator/outbox-operator/internal/backoff"
	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/relayworker/archive"
	"github.com/outbox-operator/outbox-operator/relayworker/config"
	"github.com/outbox-operator/outbox-operator/relayworker/health"
	"github.com/outbox-operator/outbox-operator/relayworker/metrics"
	"github.com/outbox-operator/outbox-operator/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/relayworker/relay"
	"github.com/outbox-operator/outbox-operator/relayworker/replay"
	"github.com/outbox-operator/outbox-operator/relayworker/store"
)

// ConfigError means bad flags or environment: exit code 2.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// ErrHelp is returned after usage was printed on request (exit 0).
var ErrHelp = errors.New("help requested")

const usage = `usage: relayworker <command> [flags]

commands:
  migrate   create or complete the outbox table, indexes and side tables (idempotent)
  relay     claim, publish and mark outbox events
  replay    hand selected DEAD events back to the relay (audited, rate-limited)
  archive   archive or delete old SENT/DEAD rows and consumer-log rows

Every flag also reads an environment variable; see docs/worker-contract.md.
Run 'relayworker <command> -h' for the flags of a command.
`

// Run executes the subcommand in args (without the program name).
func Run(ctx context.Context, args []string, getenv config.Getenv, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &ConfigError{errors.New("missing command (migrate, relay, replay, archive)")}
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return ErrHelp
	case "migrate":
		cfg, err := config.ParseMigrate(args[1:], getenv)
		if err != nil {
			return flagErr("migrate", err, stdout)
		}
		return migrate(ctx, cfg, newLogger(stderr, cfg.LogLevel, cfg.Pipeline, ""))
	case "relay":
		cfg, err := config.ParseRelay(args[1:], getenv)
		if err != nil {
			return flagErr("relay", err, stdout)
		}
		tuneGC(getenv)
		return runRelay(ctx, cfg, newLogger(stderr, cfg.LogLevel, cfg.Pipeline, cfg.WorkerID))
	case "replay":
		cfg, err := config.ParseReplay(args[1:], getenv)
		if err != nil {
			return flagErr("replay", err, stdout)
		}
		log := newLogger(stderr, cfg.LogLevel, cfg.Pipeline, "")
		db, err := openDB(ctx, cfg.DSN, 2)
		if err != nil {
			return err
		}
		defer db.Close()
		res, err := (&replay.Replayer{DB: db, Cfg: cfg, Log: log}).Run(ctx)
		if err != nil {
			return err
		}
		log.Info("replay finished", "phase", res.Phase, "matched", res.Matched, "replayed", res.Replayed,
			"succeeded", res.Succeeded, "deadAgain", res.DeadAgain)
		return nil
	case "archive":
		cfg, err := config.ParseArchive(args[1:], getenv)
		if err != nil {
			return flagErr("archive", err, stdout)
		}
		log := newLogger(stderr, cfg.LogLevel, cfg.Pipeline, "")
		db, err := openDB(ctx, cfg.DSN, 2)
		if err != nil {
			return err
		}
		defer db.Close()
		res, err := archive.Run(ctx, db, cfg, log)
		if err != nil {
			return err
		}
		log.Info("archive finished", "result", fmt.Sprintf("%+v", res))
		return nil
	default:
		return &ConfigError{fmt.Errorf("unknown command %q (want migrate, relay, replay or archive)", args[0])}
	}
}

func flagErr(cmd string, err error, stdout io.Writer) error {
	if errors.Is(err, config.ErrHelp) {
		fmt.Fprintf(stdout, "usage: relayworker %s [flags]\n%s", cmd, config.Usage(cmd))
		return ErrHelp
	}
	return &ConfigError{fmt.Errorf("%s: %w", cmd, err)}
}

// newLogger logs JSON lines with stable keys (pipeline, worker, eventId, attempt).
func newLogger(w io.Writer, level, pipeline, worker string) logr.Logger {
	v := 0
	switch level {
	case "debug":
		v = 1
	}
	l := funcr.NewJSON(func(obj string) { fmt.Fprintln(w, obj) }, funcr.Options{Verbosity: v, LogTimestamp: true})
	if level == "error" {
		l = logr.New(errorOnly{l.GetSink()}) // infos dropped, errors kept
	}
	if pipeline != "" {
		l = l.WithValues("pipeline", pipeline)
	}
	if worker != "" {
		l = l.WithValues("worker", worker)
	}
	return l
}

type errorOnly struct{ logr.LogSink }

func (errorOnly) Enabled(int) bool { return false }
func (e errorOnly) WithValues(kv ...any) logr.LogSink {
	return errorOnly{e.LogSink.WithValues(kv...)}
}
func (e errorOnly) WithName(n string) logr.LogSink { return errorOnly{e.LogSink.WithName(n)} }

// openDB opens and pings the database; the error never contains the DSN.
func openDB(ctx context.Context, dsn string, maxConns int) (*sql.DB, error) {
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		return nil, fmt.Errorf("database DSN is not valid: %s", redact(err, dsn))
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("database unreachable: %s", redact(err, dsn))
	}
	return db, nil
}

// redact removes the DSN (and its password) from driver errors.
func redact(err error, dsn string) string {
	s := err.Error()
	if dsn != "" {
		s = strings.ReplaceAll(s, dsn, "<dsn>")
	}
	return s
}

func migrate(ctx context.Context, cfg *config.Migrate, log logr.Logger) error {
	db, err := openDB(ctx, cfg.DSN, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := requirePrimary(ctx, db); err != nil {
		return err
	}
	if err := schema.Migrate(ctx, db, cfg.T, schema.Options{NotifyTrigger: cfg.NotifyTrigger}); err != nil {
		return err
	}
	log.Info("outbox table migrated", "table", cfg.T.String(), "notifyTrigger", cfg.NotifyTrigger)
	return nil
}

// requirePrimary refuses a hot standby with one clear error: claims, marks and DDL
// need the primary.
func requirePrimary(ctx context.Context, db *sql.DB) error {
	rec, err := store.InRecovery(ctx, db)
	if err != nil {
		return err
	}
	if rec {
		return store.ErrHotStandby
	}
	return nil
}

func runRelay(ctx context.Context, cfg *config.Relay, log logr.Logger) error {
	db, err := openDB(ctx, cfg.DSN, 4)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := requirePrimary(ctx, db); err != nil {
		return err
	}
	if err := schema.Verify(ctx, db, cfg.T); err != nil {
		return err
	}
	if typ, err := store.PayloadType(ctx, db, cfg.T); err != nil {
		return err
	} else if typ != "jsonb" && typ != "bytea" && typ != "json" && typ != "text" {
		return fmt.Errorf("outbox table %s: payload column type %s is not supported (jsonb or bytea)", cfg.T, typ)
	}
	st, err := store.New(ctx, db, cfg.T)
	if err != nil {
		return err
	}
	defer st.Close()
	pub, err := publish.New(publish.Options{
		Brokers: cfg.Brokers, BatchSize: cfg.BatchSize,
		TLS: cfg.KafkaTLS, TLSCAFile: cfg.KafkaTLSCAFile,
		SASLMechanism: cfg.KafkaSASLMechanism, SASLUsername: cfg.KafkaSASLUsername, SASLPassword: cfg.KafkaSASLPassword,
	})
	if err != nil {
		return &ConfigError{err}
	}
	defer func() {
		// Close waits for kafka-go's in-flight batches; never let it hold up the exit.
		done := make(chan struct{})
		go func() { _ = pub.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
		}
	}()

	m := metrics.New(cfg.Pipeline)
	h := health.New(contract.LivenessStall(cfg.Lease, cfg.PollInterval))
	var servers []*http.Server
	for _, ep := range []struct {
		addr string
		h    http.Handler
		what string
	}{
		{cfg.MetricsAddr, withPath("/metrics", m.Handler()), "metrics"},
		{cfg.HealthAddr, h.Handler(), "health"},
		{cfg.PprofAddr, nil, "pprof"},
	} {
		if ep.addr == "" {
			continue
		}
		if ep.what == "pprof" {
			ep.h = pprofHandler() // only now: it switches block/mutex sampling on
		}
		ln, err := net.Listen("tcp", ep.addr)
		if err != nil {
			return fmt.Errorf("%s endpoint %s: %w", ep.what, ep.addr, err)
		}
		srv := &http.Server{Handler: ep.h, ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, srv)
		go func() { _ = srv.Serve(ln) }()
	}
	defer func() {
		for _, s := range servers {
			c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = s.Shutdown(c)
			cancel()
		}
	}()

	r := relay.New(relay.Config{
		Table: cfg.T, DSN: cfg.DSN, WorkerID: cfg.WorkerID, BatchSize: cfg.BatchSize,
		Lease: cfg.Lease, PollInterval: cfg.PollInterval, MaxAttempts: cfg.MaxAttempts,
		Backoff:           backoff.Policy{Min: cfg.MinBackoff, Max: cfg.MaxBackoff},
		UnknownTopicGrace: cfg.UnknownTopicGrace, ShutdownTimeout: cfg.ShutdownTimeout,
	}, db, st, pub, m, h, log)
	log.Info("relay starting", "table", cfg.T.String(), "batchSize", cfg.BatchSize, "lease", cfg.Lease.String())
	if err := r.Run(ctx); err != nil {
		return err
	}
	log.Info("relay stopped")
	return nil
}

func withPath(p string, h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(p, h)
	return mux
}
