// Package shardrelay is the relay worker for an outbox table of contract v2
// (docs/contract-v2.md), named after its verbs: it leases shards (Rebalance when it
// starts and every lease/3, renewing what it holds; ReleaseAll after the in-flight
// batch on SIGTERM), reads a window batch of the shards it leases, publishes it with
// the production publisher, and advances the shards' cursors in one fenced statement
// that also writes the hold rows of the events it did not publish (advance.go); it
// publishes the hold table's due rows and settles them (holds.go), and ticks when it
// has caught up (loop.go). It writes nothing to the outbox table.
//
// The rules are v1's (internal/relayworker/relay), shared where they are code:
// verdict.Decide classifies each publish result, brokerpause pauses the worker when
// the brokers refuse a batch as a whole, pace is the idle back-off, wakeup the LISTEN.
// Flags, metrics and log keys are docs/worker-contract.md.
package shardrelay

import (
	"context"
	"database/sql"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/backoff"
	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/brokerpause"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/health"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/metrics"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardstore"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/startstop"
)

// Publisher writes messages; *publish.Publisher in production.
type Publisher interface {
	Publish(ctx context.Context, msgs []kafka.Message) []publish.Result
}

// Options configure a Relay (internal/relayworker/cli maps the relay flags to them).
type Options struct {
	Table             pgident.Table
	DSN               string // used for the LISTEN connection only ("" : polling only)
	WorkerID          string
	BatchSize         int
	Lease             time.Duration
	PollInterval      time.Duration
	MaxAttempts       int
	Backoff           backoff.Policy
	UnknownTopicGrace time.Duration
	// ShutdownTimeout bounds how long an in-flight publish may run after the stop
	// signal before it is abandoned (its events are read again by the next owner).
	ShutdownTimeout time.Duration
	// StatsInterval is how often the table-health gauges and the worker's status row
	// are refreshed (default 10s).
	StatsInterval time.Duration
	// LeaseMargin: a batch must be published this long before its shards' leases end
	// (default lease/4); a batch read too late is not published (read again later).
	LeaseMargin time.Duration
	// Format is the wire format of the messages (the zero value: native headers).
	Format publish.Format
}

// Relay is one v2 worker.
type Relay struct {
	cfg    Options
	db     *sql.DB
	st     *shardstore.Store
	pub    Publisher
	m      *metrics.Metrics
	health *health.State
	log    logr.Logger
	brk    *brokerpause.State
	status *store.StatusReporter

	wake chan struct{}
	// listening is closed once the LISTEN on the table's channel was set up or
	// failed (startBackground, awaitListening).
	listening <-chan struct{}
	// leaseNews: another worker released or wants shards (wakeUp); the loop runs a
	// lease round before its next turn.
	leaseNews atomic.Bool
	primary   func(context.Context) (bool, error)

	// The loop's own state (loop.go): the leases and when each shard's lease was last
	// renewed (worker clock, taken before the statement: the conservative side).
	leases        shardstore.Leases
	renewed       map[int16]time.Time
	nextRebalance time.Time
	next          int16 // the shard the next read starts with

}

// New builds a Relay.
func New(o Options, db *sql.DB, st *shardstore.Store, pub Publisher, m *metrics.Metrics, h *health.State, log logr.Logger) *Relay {
	if o.StatsInterval <= 0 {
		o.StatsInterval = 10 * time.Second
	}
	if o.Lease <= 0 {
		o.Lease = contract.DefaultLease
	}
	if o.LeaseMargin <= 0 {
		o.LeaseMargin = contract.LeaseMargin(o.Lease)
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = contract.DefaultShutdownTimeout
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	r := &Relay{cfg: o, db: db, st: st, pub: pub, m: m, health: h, log: log,
		wake: make(chan struct{}, 1), renewed: map[int16]time.Time{}}
	r.status = &store.StatusReporter{WorkerID: o.WorkerID, Report: store.Workers{DB: db, Table: o.Table}.Report, Log: log,
		Failed: func() { m.Errors.WithLabelValues("stats").Inc() }}
	bo := brokerpause.Options{Metrics: m, Health: h, Log: log, Report: r.reportWorker, Waited: r.keepLeases}
	bo.Prober, _ = pub.(brokerpause.Prober)
	bo.Resetter, _ = pub.(brokerpause.Resetter)
	r.brk = brokerpause.New(bo)
	r.primary = func(ctx context.Context) (bool, error) {
		rec, err := store.InRecovery(ctx, db)
		return !rec, err
	}
	return r
}

// Run relays until ctx is cancelled (SIGTERM): then it stops reading, lets the
// in-flight batch finish and advance (bounded by ShutdownTimeout), releases every
// shard it holds and its worker row, and returns nil. It returns store.ErrHotStandby
// at once when the database is a hot standby.
func (r *Relay) Run(ctx context.Context) error {
	if ok, err := r.primary(ctx); err != nil {
		return err
	} else if !ok {
		return store.ErrHotStandby
	}
	work, stopWork := r.workContext(ctx)
	defer stopWork()

	r.m.BrokerUp.Set(1)
	r.reportWorker(ctx)
	stopBackground := r.startBackground(ctx)
	defer stopBackground() // a no-op after the one below

	r.waitUpgrade(ctx)
	r.awaitListening(ctx)
	r.health.SetReady(true, "")
	r.loop(ctx, work)
	// The status loop stops first: a heartbeat written after the release would count
	// this worker as live, halving the others' fair share for a lease.
	stopBackground()
	r.releaseAll()
	return nil
}

// workContext governs publishes, advances and settles: it ends ShutdownTimeout after
// ctx does, so an in-flight batch gets that long to finish after the stop signal.
func (r *Relay) workContext(ctx context.Context) (work context.Context, stop func()) {
	work, cancelWork := context.WithCancel(context.Background())
	grace := startstop.Start(work, func(work context.Context) {
		select {
		case <-ctx.Done():
			startstop.Sleep(work, r.cfg.ShutdownTimeout) // cut short when Run ends first
			cancelWork()
		case <-work.Done():
		}
	})
	return work, func() { cancelWork(); grace.Stop() }
}

// releaseAll gives every shard back and removes the worker's row (a clean stop), so
// the other workers take the shards at their next rebalance instead of after a lease.
func (r *Relay) releaseAll() {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n := r.leases.Len()
	if err := r.st.ReleaseAll(c, &r.leases); err != nil {
		r.m.Errors.WithLabelValues("lease").Inc()
		r.log.Error(err, "could not release the shard leases; they expire after the lease", "shards", n)
		return
	}
	r.log.Info("released shard leases", "shards", n)
}

// reportWorker writes the worker's broker state and heartbeat to the worker-status
// table (the operator's BrokerUnavailable condition reads it). Best effort.
func (r *Relay) reportWorker(ctx context.Context) {
	st := r.brk.Get()
	r.status.Beat(ctx, st.Up, st.Code)
}

// wakeUp asks the loop to read now (a NOTIFY, or the LISTEN connection is back),
// and to run a lease round first when another worker released shards
// (schema.LeasesReleased: they have no owner until a worker's round takes them) or
// wants some (schema.LeasesWanted: a worker under its share; this one may be over).
func (r *Relay) wakeUp(payload string) {
	if payload == schema.LeasesReleased || payload == schema.LeasesWanted {
		r.leaseNews.Store(true) // before the send: idle checks it before its select
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}
