package cli

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"time"

	"github.com/go-logr/logr"

	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/cdc"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/config"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/health"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/metrics"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/relay"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardrelay"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardstore"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

var relayCommand = command{
	name:    "relay",
	summary: "claim, publish and mark outbox events",
	parse: func(args []string, getenv config.Getenv) (runner, error) {
		cfg, err := config.ParseRelay(args, getenv)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, stderr io.Writer) error {
			tuneGC(getenv)
			stopTracing, err := startTracing(ctx, getenv, cfg.Pipeline)
			if err != nil {
				return &ConfigError{err}
			}
			defer stopTracing()
			return runRelay(ctx, cfg, newLogger(stderr, cfg.LogLevel, cfg.Pipeline, cfg.WorkerID))
		}, nil
	},
}

// runRelay checks the table, connects the store, the publisher and the endpoints, and
// runs the relay until ctx ends (SIGTERM).
func runRelay(ctx context.Context, cfg *config.Relay, log logr.Logger) error {
	db, err := openDB(ctx, cfg.DSN, 4)
	if err != nil {
		return err
	}
	defer db.Close()
	// A v2 table (or a contract row of a version this build does not know, which
	// VerifyV2 refuses with one line) gets the v2 relay; everything else the v1 checks.
	if c, err := schema.DetectContract(ctx, db, cfg.T); err == nil && c.Version >= schema.ContractV2 {
		return runShardRelay(ctx, cfg, db, c, log)
	}
	payloadType, err := checkRelayTable(ctx, db, cfg.T)
	if err != nil {
		return err
	}
	st, err := store.New(ctx, db, relayStoreOptions(cfg))
	if err != nil {
		return err
	}
	defer st.Close()
	pub, err := publish.New(publishOptions(cfg))
	if err != nil {
		return &ConfigError{err}
	}
	defer closePublisher(pub)

	m := metrics.New(cfg.Pipeline)
	h := health.New(contract.LivenessStall(cfg.Lease, cfg.PollInterval))
	stopEndpoints, err := serveEndpoints(cfg, m, h)
	if err != nil {
		return err
	}
	defer stopEndpoints()

	opts := relayOptions(cfg, payloadType)
	if cfg.SourceMode == contract.SourceLogicalReplication {
		feed, closeFeed, err := newFeed(ctx, cfg, m, log)
		if err != nil {
			return err
		}
		defer closeFeed()
		opts.Feed = feed // r.Run runs it, and stops it before closeFeed
	}
	r := relay.New(opts, db, st, pub, m, h, log)
	log.Info("relay starting", "table", cfg.T.String(), "batchSize", cfg.BatchSize, "lease", cfg.Lease.String(), "source", cfg.SourceMode, "format", cfg.MessageFormat)
	if err := r.Run(ctx); err != nil {
		return err
	}
	log.Info("relay stopped")
	return nil
}

// runShardRelay runs the v2 relay (internal/relayworker/shardrelay) on a table of
// contract v2 (schema.DetectContract said so).
func runShardRelay(ctx context.Context, cfg *config.Relay, db *sql.DB, c schema.Contract, log logr.Logger) error {
	if cfg.SourceMode == contract.SourceLogicalReplication {
		return &ConfigError{fmt.Errorf("--source-mode %s does not apply to outbox table %s: it follows table contract v2, whose shard readers need no replication slot (use --source-mode %s)",
			cfg.SourceMode, cfg.T, contract.SourcePolling)}
	}
	if err := store.CheckPrimary(ctx, db); err != nil {
		return err
	}
	if _, err := schema.VerifyV2(ctx, db, cfg.T, c.Shards); err != nil {
		return err
	}
	payloadType, err := store.PayloadType(ctx, db, cfg.T)
	if err != nil {
		return err
	}
	st, err := shardstore.New(db, shardstore.Options{Table: cfg.T, Shards: c.Shards, WorkerID: cfg.WorkerID, Lease: cfg.Lease})
	if err != nil {
		return &ConfigError{err}
	}
	defer st.Close()
	pub, err := publish.New(publishOptions(cfg))
	if err != nil {
		return &ConfigError{err}
	}
	defer closePublisher(pub)

	m := metrics.New(cfg.Pipeline)
	h := health.New(contract.LivenessStall(cfg.Lease, cfg.PollInterval))
	stopEndpoints, err := serveEndpoints(cfg, m, h)
	if err != nil {
		return err
	}
	defer stopEndpoints()

	r := shardrelay.New(shardRelayOptions(cfg, payloadType), db, st, pub, m, h, log)
	log.Info("relay starting", "table", cfg.T.String(), "contract", "v2", "shards", c.Shards, "batchSize", cfg.BatchSize,
		"lease", cfg.Lease.String(), "format", cfg.MessageFormat)
	if err := r.Run(ctx); err != nil {
		return err
	}
	log.Info("relay stopped")
	return nil
}

// newFeed connects the logical-replication reader on a pool of its own (its reader
// lock holds one connection while it leads); closeFeed closes that pool.
func newFeed(ctx context.Context, cfg *config.Relay, m *metrics.Metrics, log logr.Logger) (feed *cdc.Feed, closeFeed func(), err error) {
	fdb, err := openDB(ctx, cfg.DSN, 2)
	if err != nil {
		return nil, nil, err
	}
	if err := replicationNames(ctx, fdb, cfg); err != nil {
		_ = fdb.Close()
		return nil, nil, err
	}
	co := cdcOptions(cfg)
	co.Log = log.WithName("cdc")
	return cdc.New(co, fdb, m), func() { _ = fdb.Close() }, nil
}

// replicationNames fills in the slot and publication names left empty: derived from
// the database, schema and table, because slots are shared by the whole server.
func replicationNames(ctx context.Context, db *sql.DB, cfg *config.Relay) error {
	if cfg.Slot == "" {
		var name string
		if err := db.QueryRowContext(ctx, `SELECT current_database()`).Scan(&name); err != nil {
			return fmt.Errorf("current database: %w", err)
		}
		cfg.Slot = contract.ReplicationName(name, cfg.T.Schema, cfg.T.Name)
	}
	if cfg.Publication == "" {
		cfg.Publication = cfg.Slot
	}
	return nil
}

// checkRelayTable refuses, with one clear error, what the relay cannot work on: a hot
// standby, a table migrate has not created or completed, a payload type it cannot send.
// It returns the payload column's type.
func checkRelayTable(ctx context.Context, db *sql.DB, t pgident.Table) (string, error) {
	if err := store.CheckPrimary(ctx, db); err != nil {
		return "", err
	}
	if err := schema.Verify(ctx, db, t); err != nil {
		return "", err
	}
	typ, err := store.PayloadType(ctx, db, t)
	if err != nil {
		return "", err
	}
	if typ != "jsonb" && typ != "bytea" && typ != "json" && typ != "text" {
		return "", fmt.Errorf("outbox table %s: payload column type %s is not supported (json, jsonb, text or bytea)", t, typ)
	}
	return typ, nil
}

// closePublisher closes the Writer, which waits for kafka-go's in-flight batches;
// never let it hold up the exit by more than two seconds.
func closePublisher(pub *publish.Publisher) {
	done := make(chan struct{})
	go func() { _ = pub.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
}
