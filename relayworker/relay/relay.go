// Package relay is the worker loop: claim a batch (one short transaction), publish it
// to Kafka after the claim committed, then mark the outcome under the worker's own
// owner token. LISTEN/NOTIFY wakes it early; polling is the safety net.
package relay

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/lib/pq"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/backoff"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/relayworker/health"
	"github.com/outbox-operator/outbox-operator/relayworker/metrics"
	"github.com/outbox-operator/outbox-operator/relayworker/publish"
	"github.com/outbox-operator/outbox-operator/relayworker/store"
)

// Publisher writes messages; *publish.Publisher in production, wrapped in tests.
type Publisher interface {
	Publish(ctx context.Context, msgs []kafka.Message) []publish.Result
}

// Config of the loop.
type Config struct {
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
}

// Relay is one worker.
type Relay struct {
	cfg     Config
	db      *sql.DB
	store   *store.Store
	pub     Publisher
	m       *metrics.Metrics
	health  *health.State
	log     logr.Logger
	wake    chan struct{}
	primary func(context.Context) (bool, error)
}

// ErrHotStandby is returned by Run when the database is a standby.
var ErrHotStandby = store.ErrHotStandby

// New builds a Relay. PrimaryProbe defaults to pg_is_in_recovery() on db.
func New(cfg Config, db *sql.DB, st *store.Store, pub Publisher, m *metrics.Metrics, h *health.State, log logr.Logger) *Relay {
	if cfg.StatsInterval <= 0 {
		cfg.StatsInterval = 10 * time.Second
	}
	if cfg.LeaseMargin <= 0 {
		cfg.LeaseMargin = cfg.Lease / 4
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 20 * time.Second
	}
	r := &Relay{cfg: cfg, db: db, store: st, pub: pub, m: m, health: h, log: log,
		wake: make(chan struct{}, 1)}
	r.primary = func(ctx context.Context) (bool, error) {
		rec, err := store.InRecovery(ctx, db)
		return !rec, err
	}
	return r
}

// SetPrimaryProbe replaces the hot-standby probe (tests).
func (r *Relay) SetPrimaryProbe(p func(context.Context) (isPrimary bool, err error)) { r.primary = p }

// Wake asks the loop to claim now.
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Relay) checkPrimary(ctx context.Context) error {
	ok, err := r.primary(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return ErrHotStandby
	}
	return nil
}

// Run relays until ctx is cancelled (SIGTERM): then it stops claiming, lets the
// in-flight batch finish (bounded by ShutdownTimeout and the lease), releases what it
// did not publish and returns nil. It returns an error at once when the database is
// a hot standby.
func (r *Relay) Run(ctx context.Context) error {
	if err := r.checkPrimary(ctx); err != nil {
		return err
	}
	// work is cancelled ShutdownTimeout after ctx: in-flight publishes get that long.
	work, cancelWork := context.WithCancel(context.Background())
	defer cancelWork()
	go func() {
		select {
		case <-ctx.Done():
			t := time.NewTimer(r.cfg.ShutdownTimeout)
			defer t.Stop()
			select {
			case <-t.C:
				cancelWork()
			case <-work.Done():
			}
		case <-work.Done():
		}
	}()

	var bg sync.WaitGroup
	defer bg.Wait()
	bgCtx, stopBG := context.WithCancel(ctx)
	defer stopBG()
	if r.cfg.DSN != "" {
		bg.Add(1)
		go func() { defer bg.Done(); r.listen(bgCtx) }()
	}
	bg.Add(1)
	go func() { defer bg.Done(); r.stats(bgCtx) }()

	// Marks run in their own goroutine, one batch at a time, while the loop claims and
	// publishes the next batch: a batch's rows stay SENDING under its token until its
	// mark commits, so the overlap changes nothing another claim can see (newer versions
	// of those aggregates stay unclaimable until then). The hand-over blocks while the
	// previous mark is still running, so at most one batch waits for its marks.
	marks := make(chan *published)
	marked := make(chan struct{})
	go func() {
		defer close(marked)
		for b := range marks {
			r.mark(b.token, &b.out)
		}
	}()
	defer func() { close(marks); <-marked }() // every published batch is marked before Run returns

	// While draining (the last claim was full), the next claim runs during this batch's
	// publish. Its rows are claimable only because they do not depend on anything in
	// flight: the claim skips newer versions of aggregates whose older version is
	// SENDING, and this batch stays SENDING until its mark commits.
	var ahead chan claimed
	r.health.SetReady(true, "")
	failures := 0
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		if ctx.Err() != nil {
			if ahead != nil {
				r.unclaim(<-ahead) // claimed, never published: release for other workers
			}
			r.log.Info("stop signal: no more claims")
			return nil
		}
		r.health.Beat()
		var c claimed
		if ahead != nil {
			c, ahead = <-ahead, nil
		} else {
			c = r.claim(work) // a started claim always completes, so no row is left SENDING by a cancelled claim
		}
		if c.err == nil && len(c.rows) >= r.cfg.BatchSize {
			ahead = make(chan claimed, 1)
			go func(ch chan<- claimed) { ch <- r.claim(work) }(ahead)
		}
		if b := r.publish(work, c); b != nil {
			marks <- b
		}
		n, err := len(c.rows), c.err
		if err != nil {
			failures++
			r.m.Errors.WithLabelValues("claim").Inc()
			delay := r.cfg.Backoff.Delay(failures)
			reason := "database error: " + err.Error()
			if perr := r.checkPrimary(ctx); errors.Is(perr, ErrHotStandby) {
				reason = ErrHotStandby.Error()
			}
			r.health.SetReady(false, reason)
			r.log.Error(err, "relay cycle failed; backing off", "delay", delay.String(), "failures", failures)
			sleep(ctx, delay) // cut short by the stop signal, which the loop head handles
			continue
		}
		if failures > 0 {
			failures = 0
			r.health.SetReady(true, "")
		}
		if n >= r.cfg.BatchSize {
			continue // a full batch: there is probably more, drain without waiting
		}
		if !poll.Stop() {
			select {
			case <-poll.C:
			default:
			}
		}
		poll.Reset(r.cfg.PollInterval)
		select {
		case <-ctx.Done():
		case <-r.wake:
		case <-poll.C:
		}
	}
}

// sleep waits for d or until ctx ends, whichever comes first.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// newToken returns a fresh owner token: worker id plus 64 random bits.
func (r *Relay) newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return r.cfg.WorkerID + "/" + hex.EncodeToString(b[:])
}

// Cycle runs one claim -> publish -> mark round and returns how many rows it claimed.
// claimCtx governs the claim (cancelled on SIGTERM); work governs publish and marks.
func (r *Relay) Cycle(claimCtx, work context.Context) (int, error) {
	c := r.claim(claimCtx)
	if b := r.publish(work, c); b != nil {
		r.mark(b.token, &b.out)
	}
	return len(c.rows), c.err
}

// published is a batch whose publish finished and whose marks are still to be written.
type published struct {
	token string
	out   outcome
}

// claimed is the result of one claim statement.
type claimed struct {
	token string
	rows  []store.Row
	start time.Time // when the claim was sent: the conservative start of the lease
	err   error
}

// claim claims up to BatchSize rows under a fresh owner token.
func (r *Relay) claim(ctx context.Context) claimed {
	c := claimed{token: r.newToken(), start: time.Now()} // monotonic: only durations are taken from the worker clock
	c.rows, c.err = r.store.Claim(ctx, c.token, r.cfg.BatchSize, r.cfg.Lease)
	r.m.ClaimLatency.Observe(time.Since(c.start).Seconds())
	if c.err == nil {
		r.m.ClaimBatchSize.Observe(float64(len(c.rows)))
	}
	return c
}

// publish publishes a claimed batch and returns what to mark (nil when nothing was
// claimed).
func (r *Relay) publish(work context.Context, c claimed) *published {
	if c.err != nil || len(c.rows) == 0 {
		return nil
	}
	// The lease started at the latest when the claim returned... and at the earliest
	// when we sent it; measuring from `start` is the conservative side.
	deadline := c.start.Add(r.cfg.Lease - r.cfg.LeaseMargin)
	return &published{token: c.token, out: r.process(work, c.rows, deadline)}
}

// unclaim hands a claimed but unpublished batch back (shutdown).
func (r *Relay) unclaim(c claimed) {
	if c.err != nil || len(c.rows) == 0 {
		return
	}
	out := outcome{dest: map[string]string{}}
	for i := range c.rows {
		out.release = append(out.release, c.rows[i].EventID)
	}
	r.mark(c.token, &out)
}

type outcome struct {
	sent []store.Sent
	// retry includes missing-topic waits inside --unknown-topic-grace: those are
	// Uncounted, the grace and not --max-attempts bounds them.
	retry   []store.Failure
	dead    []store.Failure
	release []string
	dest    map[string]string // event id -> destination, for metric labels
}

// process publishes claimed rows and returns what to mark.
func (r *Relay) process(work context.Context, rows []store.Row, deadline time.Time) outcome {
	out := outcome{dest: make(map[string]string, len(rows))}
	expired := 0
	for i := range rows {
		out.dest[rows[i].EventID] = rows[i].Destination
		if rows[i].Expired {
			expired++
		}
	}
	if expired > 0 {
		r.m.LeaseExpired.Add(float64(expired))
		r.log.Info("took over expired leases", "rows", expired)
	}
	// Per-aggregate order: publish in (aggregate, version) order; several versions of
	// one aggregate go out together only when they share topic and key (one partition,
	// one produce request). Otherwise only the oldest is published now.
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := &rows[i], &rows[j]
		if a.AggregateType != b.AggregateType {
			return a.AggregateType < b.AggregateType
		}
		if a.AggregateID != b.AggregateID {
			return a.AggregateID < b.AggregateID
		}
		return a.AggregateVersion < b.AggregateVersion
	})
	msgs := make([]kafka.Message, 0, len(rows))
	idx := make([]int, 0, len(rows))
	// prevHeld: rows[i-1] was released by the order guard, so its successors in the
	// same aggregate must wait too. Only the direct predecessor matters: rows are
	// sorted, and a held row holds every later version of its aggregate in turn.
	prevHeld := false
	for i := range rows {
		row := &rows[i]
		if i > 0 {
			prev := &rows[i-1]
			if prev.AggregateType == row.AggregateType && prev.AggregateID == row.AggregateID &&
				(prev.Destination != row.Destination || prev.MessageKey != row.MessageKey || prevHeld) {
				out.release = append(out.release, row.EventID)
				prevHeld = true
				continue
			}
		}
		prevHeld = false
		msg, err := publish.Message(row)
		if err != nil {
			var bad *publish.BadEventError
			if errors.As(err, &bad) {
				out.dead = append(out.dead, store.Failure{EventID: row.EventID, Code: bad.Code, Message: bad.Msg})
				continue
			}
			out.dead = append(out.dead, store.Failure{EventID: row.EventID, Code: publish.CodeInvalidPayload, Message: err.Error()})
			continue
		}
		msgs = append(msgs, msg)
		idx = append(idx, i)
	}

	if len(msgs) > 0 {
		if time.Until(deadline) <= 0 {
			// Lease guard: the claim itself took so long (pause, overload) that the lease
			// is nearly over; publishing now could race a take-over. Hand them back.
			for _, i := range idx {
				out.release = append(out.release, rows[i].EventID)
			}
			r.log.Info("lease nearly expired before publishing; releasing batch", "rows", len(idx))
		} else {
			pubCtx, cancel := context.WithDeadline(work, deadline)
			t0 := time.Now()
			results := r.pub.Publish(pubCtx, msgs)
			cancel()
			r.m.PublishLatency.Observe(time.Since(t0).Seconds())
			shutdown := work.Err() != nil
			for k, res := range results {
				r.classify(&rows[idx[k]], res, &out, shutdown)
			}
		}
	}
	return out
}

func (r *Relay) classify(row *store.Row, res publish.Result, out *outcome, shutdown bool) {
	if res.Err == nil {
		out.sent = append(out.sent, store.Sent{EventID: row.EventID, Partition: res.Partition, Offset: res.Offset})
		return
	}
	if errors.Is(res.Err, publish.ErrNotSent) {
		// Held back behind a failed older write: never sent, so no attempt is counted.
		out.release = append(out.release, row.EventID)
		return
	}
	class, code := publish.Classify(res.Err)
	msg := res.Err.Error()
	attempt := row.RetryCount + 1
	switch class {
	case publish.Permanent:
		out.dead = append(out.dead, store.Failure{EventID: row.EventID, Code: code, Message: msg})
		r.log.Info("permanent publish failure; event is DEAD", "eventId", row.EventID, "attempt", attempt, "code", code)
		return
	case publish.TopicMissing:
		if row.Age >= r.cfg.UnknownTopicGrace {
			out.dead = append(out.dead, store.Failure{EventID: row.EventID, Code: code,
				Message: fmt.Sprintf("topic %q does not exist (unknown-topic grace %s passed): %s", row.Destination, r.cfg.UnknownTopicGrace, msg)})
			return
		}
		// The wait grows with the row's age, not its attempts: waiting for a topic must
		// not use up the attempt budget a later broker outage may need.
		delay := r.cfg.Backoff.ForAge(row.Age)
		if left := r.cfg.UnknownTopicGrace - row.Age; delay > left {
			delay = left + 10*time.Millisecond // come back right when the grace ends
		}
		out.retry = append(out.retry, store.Failure{EventID: row.EventID, Code: code, Message: msg, Delay: delay, Uncounted: true})
		return
	case publish.Unknown:
		r.m.SendUnknown.WithLabelValues(row.Destination).Inc()
		if shutdown {
			// Abandoned at shutdown: hand the row back for an immediate re-send by
			// another worker (a duplicate is possible and allowed) instead of a backoff.
			out.release = append(out.release, row.EventID)
			return
		}
	}
	out.retry = append(out.retry, store.Failure{EventID: row.EventID, Code: code, Message: msg,
		Delay: r.cfg.Backoff.Delay(attempt)})
}

func (r *Relay) mark(token string, out *outcome) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if len(out.sent) > 0 {
		n, err := r.store.MarkSent(ctx, token, out.sent)
		if err != nil {
			// Published but not marked: the lease expires and the rows are sent again
			// (a duplicate, never a loss).
			r.m.Errors.WithLabelValues("mark").Inc()
			r.log.Error(err, "mark SENT failed; rows will be re-published after the lease", "rows", len(out.sent))
		} else {
			if lost := int64(len(out.sent)) - n; lost > 0 {
				r.m.MarkFenced.Add(float64(lost))
				r.log.Info("lease lost before marking SENT; another worker owns the rows", "rows", lost)
			}
			counts := map[string]int{}
			for _, s := range out.sent {
				counts[out.dest[s.EventID]]++
			}
			for d, c := range counts {
				r.m.SendSuccess.WithLabelValues(d).Add(float64(c))
			}
		}
	}
	if len(out.retry) > 0 {
		n, err := r.markRetry(ctx, token, r.cfg.MaxAttempts, out.retry, out.dest)
		if err == nil {
			if lost := int64(len(out.retry)) - n; lost > 0 {
				r.m.MarkFenced.Add(float64(lost))
			}
		}
	}
	r.markDeadAndRelease(ctx, token, out)
}

func (r *Relay) markRetry(ctx context.Context, token string, maxAttempts int, fs []store.Failure, dest map[string]string) (int64, error) {
	deadIDs, n, err := r.store.MarkRetry(ctx, token, maxAttempts, fs)
	if err != nil {
		r.m.Errors.WithLabelValues("mark").Inc()
		r.log.Error(err, "mark RETRY failed", "rows", len(fs))
		return 0, err
	}
	dead := map[string]bool{}
	for _, id := range deadIDs {
		dead[id] = true
	}
	for _, f := range fs {
		if dead[f.EventID] {
			r.m.SendDead.WithLabelValues(dest[f.EventID], store.CodeMaxAttempts).Inc()
			r.log.Info("attempts used up; event is DEAD", "eventId", f.EventID, "code", f.Code)
		} else {
			r.m.SendRetry.WithLabelValues(dest[f.EventID], f.Code).Inc()
		}
	}
	// One line per failed batch (not per row), at the default level: a broker outage or
	// a wrong TLS/SASL setting must be visible without debug logs, and the backoff
	// bounds how often this line repeats.
	r.log.Info("publish failed; scheduled retry", "rows", len(fs), "code", fs[0].Code,
		"eventId", fs[0].EventID, "error", fs[0].Message, "delay", fs[0].Delay.String())
	return n, nil
}

func (r *Relay) markDeadAndRelease(ctx context.Context, token string, out *outcome) {
	if len(out.dead) > 0 {
		n, err := r.store.MarkDead(ctx, token, out.dead)
		if err != nil {
			r.m.Errors.WithLabelValues("mark").Inc()
			r.log.Error(err, "mark DEAD failed", "rows", len(out.dead))
		} else {
			if lost := int64(len(out.dead)) - n; lost > 0 {
				r.m.MarkFenced.Add(float64(lost))
			}
			for _, f := range out.dead {
				r.m.SendDead.WithLabelValues(out.dest[f.EventID], f.Code).Inc()
				r.log.Info("event is DEAD", "eventId", f.EventID, "code", f.Code)
			}
		}
	}
	if len(out.release) > 0 {
		n, err := r.store.Release(ctx, token, out.release)
		if err != nil {
			r.m.Errors.WithLabelValues("mark").Inc()
			r.log.Error(err, "release failed; rows wait for lease expiry", "rows", len(out.release))
		} else {
			r.m.LeaseReleased.Add(float64(n))
		}
	}
}

// listen wakes the loop on NOTIFY. Losing the connection or a notification only costs
// latency: polling still finds every row. On reconnect the loop is woken once, since
// notifications sent while disconnected are gone.
func (r *Relay) listen(ctx context.Context) {
	ch := schema.Channel(r.cfg.Table)
	l := pq.NewListener(r.cfg.DSN, 100*time.Millisecond, 10*time.Second, func(ev pq.ListenerEventType, err error) {
		switch ev {
		case pq.ListenerEventConnectionAttemptFailed, pq.ListenerEventDisconnected:
			r.m.Errors.WithLabelValues("listen").Inc()
			if err != nil {
				r.log.V(1).Info("LISTEN connection problem; polling continues", "error", err.Error())
			}
		case pq.ListenerEventReconnected:
			r.Wake()
		}
	})
	defer l.Close()
	if err := l.Listen(ch); err != nil {
		r.m.Errors.WithLabelValues("listen").Inc()
		r.log.Error(err, "LISTEN failed; relying on polling")
	}
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-l.Notify:
			_ = n
			r.Wake()
		}
	}
}

func (r *Relay) stats(ctx context.Context) {
	t := time.NewTicker(r.cfg.StatsInterval)
	defer t.Stop()
	for {
		r.refreshGauges(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// refreshGauges sets the backlog and table-health gauges; each read is bounded and a
// failure only counts an error (the gauges keep their last values).
func (r *Relay) refreshGauges(ctx context.Context) {
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if n, age, err := r.store.Backlog(c); err == nil {
		r.m.PendingCount.Set(float64(n))
		r.m.OldestPendingAge.Set(age.Seconds())
	} else if ctx.Err() == nil {
		r.m.Errors.WithLabelValues("stats").Inc()
	}
	if h, err := r.store.Health(c); err == nil {
		r.m.TableDeadTuples.Set(float64(h.DeadTuples))
		r.m.TableLiveTuples.Set(float64(h.LiveTuples))
		r.m.TableSizeBytes.Set(float64(h.SizeBytes))
	} else if ctx.Err() == nil {
		r.m.Errors.WithLabelValues("stats").Inc()
	}
}
