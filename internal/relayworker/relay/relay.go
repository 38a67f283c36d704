// Package relay is the worker, named after its three verbs: claim a batch (claim.go,
// one short transaction), publish it to Kafka after the claim committed (publish.go),
// then mark the outcome under the batch's own owner token (mark.go). Run is the claim
// loop plus the loops beside it: the mark loop, the LISTEN wake-up and the gauge and
// heartbeat refresher (background.go). Broker-wide failures pause the claim loop
// (broker.go). It runs on tables of contract v1, whose state machine is
// docs/operations.md, "What a v1 table is"; flags, metrics and log keys are
// docs/worker-contract.md.
package relay

import (
	"context"
	"database/sql"
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
	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
	"github.com/outbox-operator/outbox-operator/internal/startstop"
)

// Publisher writes messages; *publish.Publisher in production, wrapped in tests.
type Publisher interface {
	Publish(ctx context.Context, msgs []kafka.Message) []publish.Result
}

// Options configure a Relay (internal/relayworker/cli maps the relay flags to them).
type Options struct {
	Table             pgident.Table
	DSN               string // used for the LISTEN connection only
	WorkerID          string
	BatchSize         int
	Lease             time.Duration
	PollInterval      time.Duration
	MaxAttempts       int
	Backoff           backoff.Policy
	UnknownTopicGrace time.Duration
	// ShutdownTimeout bounds how long an in-flight publish may run after the stop
	// signal before it is abandoned (outcome unknown, rows released).
	ShutdownTimeout time.Duration
	// StatsInterval is how often the backlog gauges are refreshed (default 10s).
	StatsInterval time.Duration
	// LeaseMargin: the batch must be published this long before its lease ends
	// (default lease/4); rows not published by then are released.
	LeaseMargin time.Duration
	// Feed, in logical-replication mode, delivers the ids of newly inserted rows
	// (internal/relayworker/cdc); Run runs it beside the LISTEN and stats loops, the claim loop
	// claims its ids and polls only once per PollInterval while the feed has work. The
	// store then claims PENDING rows only after the hand-over age
	// (store.Options.HandoverAfter).
	Feed Feed
	// Format is the wire format of the messages (the zero value: native headers).
	Format publish.Format
}

// Feed is the source of newly inserted rows in logical-replication mode.
type Feed interface {
	// Run reads the source until ctx ends; Run of the Relay starts and stops it.
	Run(ctx context.Context)
	// Arrived receives a value when new ids were queued since the last receive; an
	// idle claim loop waits on it as it waits on NOTIFY.
	Arrived() <-chan struct{}
	// Take returns up to max event ids in commit order; done is called once their
	// batch is marked or given up, with the ids the claim left that may still be
	// claimable (PENDING, or not visible yet).
	Take(max int) (ids []string, done func(retry []string))
	// Claimed counts the rows a claim by id took.
	Claimed(n int)
}

// Relay is one worker.
type Relay struct {
	cfg     Options
	db      *sql.DB
	store   *store.Store
	pub     Publisher
	marks   *marker
	m       *metrics.Metrics
	health  *health.State
	log     logr.Logger
	wake    chan struct{}
	arrived <-chan struct{} // the feed's Arrived, nil without a feed
	primary func(context.Context) (bool, error)

	lastPoll time.Time // last polling claim in logical-replication mode (claim loop only)
	parked   parked    // rows to release when a pause ends (claim loop only)

	brk    *brokerpause.State
	status *store.StatusReporter
}

// New builds a Relay. PrimaryProbe defaults to pg_is_in_recovery() on db.
func New(o Options, db *sql.DB, st *store.Store, pub Publisher, m *metrics.Metrics, h *health.State, log logr.Logger) *Relay {
	if o.StatsInterval <= 0 {
		o.StatsInterval = 10 * time.Second
	}
	if o.LeaseMargin <= 0 {
		o.LeaseMargin = contract.LeaseMargin(o.Lease)
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = contract.DefaultShutdownTimeout
	}
	r := &Relay{cfg: o, db: db, store: st, pub: pub, m: m, health: h, log: log,
		wake: make(chan struct{}, 1)}
	if o.Feed != nil {
		r.arrived = o.Feed.Arrived()
	}
	r.marks = &marker{store: st, m: m, log: log, maxAttempts: o.MaxAttempts}
	r.status = &store.StatusReporter{WorkerID: o.WorkerID, Report: st.ReportWorker, Log: log,
		Failed: func() { m.Errors.WithLabelValues("stats").Inc() }}
	bo := brokerpause.Options{Metrics: m, Health: h, Log: log, Report: r.reportWorker}
	bo.Prober, _ = pub.(Prober) // nil: the trial batch follows one pause wait, unprobed
	bo.Resetter, _ = pub.(Resetter)
	r.brk = brokerpause.New(bo)
	r.primary = func(ctx context.Context) (bool, error) {
		rec, err := store.InRecovery(ctx, db)
		return !rec, err
	}
	return r
}

// SetPrimaryProbe replaces the hot-standby probe (tests).
func (r *Relay) SetPrimaryProbe(p func(context.Context) (isPrimary bool, err error)) { r.primary = p }

// wakeUp asks the loop to claim now (a NOTIFY, or the LISTEN connection is back).
func (r *Relay) wakeUp() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// drainWake drops a wake-up (a NOTIFY, or the feed's Arrived) that came before the
// claim about to start: that claim sees the rows it announced. Left in the channel,
// it would make the next idle wait end at once in a claim that finds nothing (with
// NOTIFYing producers at 1,000 events/s: twice the claims, and a worse p99).
func (r *Relay) drainWake() {
	select {
	case <-r.wake:
	default:
	}
	select {
	case <-r.arrived:
	default:
	}
}

func (r *Relay) checkPrimary(ctx context.Context) error {
	ok, err := r.primary(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return store.ErrHotStandby
	}
	return nil
}

// Run relays until ctx is cancelled (SIGTERM): then it stops claiming, lets the
// in-flight batch finish (bounded by ShutdownTimeout and the lease), releases what it
// did not publish and returns nil. It returns store.ErrHotStandby at once when the
// database is a hot standby, and *UpgradedError when a claim finds the table upgraded
// to contract v2.
//
// The deferred steps run in reverse: the claim loop has returned, so the mark loop
// writes the last published batch, then the background loops stop (the feed lets go
// of its lock and slot), then the worker's status row goes.
func (r *Relay) Run(ctx context.Context) error {
	if err := r.checkPrimary(ctx); err != nil {
		return err
	}
	work, stopWork := r.workContext(ctx)
	defer stopWork()

	r.m.BrokerUp.Set(1)
	r.reportWorker(ctx)
	defer r.removeWorker()

	stopBackground := r.startBackground(ctx)
	defer stopBackground()

	r.marks.start()
	defer r.marks.stop() // every published batch is marked before Run returns

	r.health.SetReady(true, "")
	return r.claimLoop(ctx, work)
}

// workContext governs publishes and marks: it ends ShutdownTimeout after ctx does, so
// an in-flight publish gets that long to finish after the stop signal. stop ends it
// at once (Run has nothing left in flight).
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
