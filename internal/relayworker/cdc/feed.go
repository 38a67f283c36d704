// Package cdc is the relay's logical-replication source (docs/architecture.md,
// "Source modes"). One worker per slot, the holder of a session advisory lock, streams
// the outbox table's inserts through a pgoutput publication and queues their event ids
// in commit order; the relay's claim loop takes them (Take) and claims those rows by
// id, then publishes and marks them exactly as it does polled rows. The table stays
// the ledger: a row the stream missed or skipped is still PENDING there and polling
// claims it after the hand-over age, so a lost slot, a dead reader or a skipped
// aggregate delays an event and never loses it. The slot is confirmed only up to the
// transactions whose rows are all marked.
package cdc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/pgversion"
	"github.com/outbox-operator/outbox-operator/internal/redact"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/metrics"
	"github.com/outbox-operator/outbox-operator/internal/replslot"
)

// Options configure a Feed.
type Options struct {
	DSN         string
	Table       pgident.Table
	Slot        string
	Publication string
	// Heartbeat: an idle reader writes a logical message this often, so its confirmed
	// position (and the WAL the slot holds) keeps moving.
	Heartbeat time.Duration
	// MaxQueued: the reader stops reading the stream while this many delivered inserts
	// wait to be claimed (default 100,000).
	MaxQueued int
	// CreateSlot: make the publication and slot when missing (and replace an
	// invalidated slot). Off under the operator, which owns them (internal/replslot).
	CreateSlot bool
	// HandoverAfter: an id a claim left that may still be claimable is offered again
	// until it has been queued this long (--cdc-handover-after: then polling takes it,
	// store.Options.HandoverAfter).
	HandoverAfter time.Duration
	Log           logr.Logger
}

// Feed is the logical-replication source of one worker.
type Feed struct {
	o       Options
	db      *sql.DB
	m       *metrics.Metrics
	q       atomic.Pointer[queue] // nil while this worker is not the reader
	arrived chan struct{}         // one pending signal: new inserts were queued
}

// New returns a feed; Run makes it work (the relay runs it: relay.Options.Feed).
func New(o Options, db *sql.DB, m *metrics.Metrics) *Feed {
	if o.MaxQueued <= 0 {
		o.MaxQueued = 100_000
	}
	return &Feed{o: o, db: db, m: m, arrived: make(chan struct{}, 1)}
}

// Arrived receives a value when new inserts were queued since the last receive (the
// relay's idle claim loop waits on it).
func (f *Feed) Arrived() <-chan struct{} { return f.arrived }

// signal notes that inserts were queued; a signal not yet received already says so.
func (f *Feed) signal() {
	select {
	case f.arrived <- struct{}{}:
	default:
	}
}

// Take hands the claim loop up to max delivered event ids, in commit order; done must
// be called once their batch is marked, with the ids the claim left that are still
// PENDING (they are offered again for a while). It returns nothing while this worker
// stands by.
func (f *Feed) Take(max int) ([]string, func(retry []string)) {
	q := f.q.Load()
	if q == nil {
		return nil, func([]string) {}
	}
	ids, done := q.take(max)
	f.m.CDCQueued.Set(float64(q.len()))
	return ids, done
}

// Claimed counts rows a claim by id took.
func (f *Feed) Claimed(n int) { f.m.CDCClaimed.Add(float64(n)) }

// Run competes for the slot until ctx ends: it takes the reader lock when it is free
// (checked every second, so a dead reader's successor starts within about a second of
// PostgreSQL noticing), streams while it holds it, and backs off after errors.
func (f *Feed) Run(ctx context.Context) {
	failures := 0
	for ctx.Err() == nil {
		led, err := f.tryLead(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			failures++
			f.o.Log.Error(errors.New(redact.DSN(err.Error(), f.o.DSN)), "logical replication reader stopped; polling covers the table meanwhile",
				"slot", f.o.Slot, "failures", failures)
		case led:
			failures = 0
		}
		wait := time.Second
		if failures > 0 {
			wait = min(time.Duration(failures)*time.Second, 30*time.Second)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// tryLead streams if this worker gets the reader lock; led reports whether it did.
func (f *Feed) tryLead(ctx context.Context) (led bool, err error) {
	conn, err := f.db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	ok, err := tryLock(ctx, conn, f.o.Slot)
	if err != nil || !ok {
		return false, err
	}
	defer unlock(context.Background(), conn, f.o.Slot)
	start, err := f.slotStart(ctx)
	if err != nil {
		return true, err
	}
	f.o.Log.Info("logical replication reader starting", "slot", f.o.Slot, "publication", f.o.Publication, "confirmedLsn", start.String())
	q := newQueue(start, f.o.HandoverAfter)
	f.q.Store(q)
	f.m.CDCReader.Set(1)
	defer func() {
		f.q.Store(nil)
		f.m.CDCReader.Set(0)
		f.m.CDCQueued.Set(0)
	}()
	return true, f.stream(ctx, conn, q, start)
}

// slotStart is the slot's confirmed position, after making the slot when this worker
// is to.
func (f *Feed) slotStart(ctx context.Context) (pglogrepl.LSN, error) {
	seen, err := replslot.Read(ctx, f.db, f.o.Slot, f.o.Publication)
	if err != nil {
		return 0, err
	}
	pos := seen.Slot.ConfirmedLSN
	switch {
	case f.o.CreateSlot:
		if pos, err = f.makeSlot(ctx, seen); err != nil {
			return 0, err
		}
	case !seen.SlotFound || seen.Slot.Lost():
		return 0, fmt.Errorf("replication slot %s is missing or invalidated; the operator makes it (polling publishes meanwhile)", f.o.Slot)
	}
	lsn, err := pglogrepl.ParseLSN(pos)
	if err != nil {
		return 0, fmt.Errorf("slot %s: confirmed position %q: %w", f.o.Slot, pos, err)
	}
	return lsn, nil
}

// makeSlot makes the publication and the slot when they are missing, and replaces a
// slot PostgreSQL invalidated (max_slot_wal_keep_size): its WAL is gone, and the rows
// committed meanwhile are PENDING in the table, where polling claims them after the
// hand-over age. A worker run by hand owns its slot; under the operator it makes none.
// It returns the slot's confirmed position.
func (f *Feed) makeSlot(ctx context.Context, seen replslot.State) (string, error) {
	if !seen.PublicationFound {
		if err := replslot.CreatePublication(ctx, f.db, f.o.Publication, f.o.Table); err != nil {
			return "", err
		}
	}
	if seen.SlotFound && !seen.Slot.Lost() {
		return seen.Slot.ConfirmedLSN, nil
	}
	if seen.SlotFound {
		if err := replslot.DropSlot(ctx, f.db, f.o.Slot); err != nil {
			return "", err
		}
	}
	pos, err := replslot.CreateSlot(ctx, f.db, f.o.Slot)
	if err == nil && seen.SlotFound {
		f.o.Log.Info("replication slot was invalidated (its WAL was removed); made a new one: rows committed meanwhile are published by polling",
			"slot", f.o.Slot)
	}
	return pos, err
}

// stream runs the replication connection until ctx ends or something fails.
func (f *Feed) stream(ctx context.Context, lockConn *sql.Conn, q *queue, start pglogrepl.LSN) error {
	rc, err := connect(ctx, f.o.DSN)
	if err != nil {
		return err
	}
	defer rc.Close(context.Background())
	major, err := pgversion.ParseMajor(rc.ParameterStatus("server_version"))
	if err != nil {
		return fmt.Errorf("replication connection: %w", err)
	}
	err = pglogrepl.StartReplication(ctx, rc, f.o.Slot, start, pglogrepl.StartReplicationOptions{
		PluginArgs: pluginArgs(f.o.Publication, major),
	})
	if err != nil {
		return fmt.Errorf("start replication on slot %s: %w", f.o.Slot, err)
	}
	d := newDecoder(f.o.Table)
	s := &session{f: f, rc: rc, q: q, d: d, lockConn: lockConn, confirmed: start, lastWork: time.Now()}
	return s.run(ctx)
}

// pluginArgs are the pgoutput options for a server of that major version. Protocol 1
// (PostgreSQL 10+) carries all the reader needs. The heartbeat's logical messages
// come through as such only from 14 on ("messages"; 13 refuses the option); on 13
// the reader learns the same position from the keepalive the server sends once it
// has decoded past the heartbeat, and the heartbeat still moves the slot.
func pluginArgs(publication string, major int) []string {
	args := []string{"proto_version '1'", "publication_names '" + publication + "'"}
	if major >= 14 {
		args = append(args, "messages 'true'")
	}
	return args
}

// connect opens a replication connection (replication=database) with the DSN.
func connect(ctx context.Context, dsn string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("replication connection: %s", redact.DSN(err.Error(), dsn))
	}
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["application_name"] = "outbox-relay-cdc"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("replication connection: %s", redact.DSN(err.Error(), dsn))
	}
	return conn, nil
}

// statusInterval is how often the reader tells the server its position (well inside
// wal_sender_timeout, 60 s by default), and checks that it still holds the lock.
const statusInterval = time.Second

// session is one streaming connection's state.
type session struct {
	f         *Feed
	rc        *pgconn.PgConn
	q         *queue
	d         *decoder
	lockConn  *sql.Conn
	confirmed pglogrepl.LSN
	lastWork  time.Time // last delivered insert or heartbeat
	nextCheck time.Time
}

func (s *session) run(ctx context.Context) error {
	for {
		if err := s.tick(ctx); err != nil {
			return err
		}
		if s.q.len() >= s.f.o.MaxQueued {
			// Back-pressure: let the claims catch up; keep reporting our position.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		rctx, cancel := context.WithDeadline(ctx, s.nextCheck)
		msg, err := s.rc.ReceiveMessage(rctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if pgconn.Timeout(err) {
				continue
			}
			return fmt.Errorf("replication stream: %w", err)
		}
		if err := s.handle(ctx, msg); err != nil {
			return err
		}
	}
}

// tick does the periodic work: the standby status, the lock check, the heartbeat.
func (s *session) tick(ctx context.Context) error {
	now := time.Now()
	if now.Before(s.nextCheck) {
		return s.confirm(ctx, false)
	}
	s.nextCheck = now.Add(statusInterval)
	if err := s.lockConn.PingContext(ctx); err != nil {
		return fmt.Errorf("lost the reader lock's connection: %w", err)
	}
	if now.Sub(s.lastWork) >= s.f.o.Heartbeat && !s.d.inTxn {
		s.lastWork = now
		if _, err := s.f.db.ExecContext(ctx, `SELECT pg_logical_emit_message(false, 'outbox-operator', 'heartbeat')`); err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
	}
	return s.confirm(ctx, true)
}

// confirm sends the standby status when the confirmable position moved, or always
// when force (the server expects a reply now and then).
func (s *session) confirm(ctx context.Context, force bool) error {
	lsn := s.q.confirmable()
	if lsn == s.confirmed && !force {
		return nil
	}
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, s.rc, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: lsn, WALFlushPosition: lsn, WALApplyPosition: lsn,
	}); err != nil {
		return fmt.Errorf("standby status: %w", err)
	}
	s.confirmed = lsn
	s.f.m.CDCConfirmedLSN.Set(float64(lsn))
	return nil
}

// handle processes one message of the stream.
func (s *session) handle(ctx context.Context, msg pgproto3.BackendMessage) error {
	switch m := msg.(type) {
	case *pgproto3.CopyData:
		switch m.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
			if err != nil {
				return fmt.Errorf("keepalive: %w", err)
			}
			if !s.d.inTxn {
				s.q.idle(ka.ServerWALEnd)
			}
			if ka.ReplyRequested {
				return s.confirm(ctx, true)
			}
		case pglogrepl.XLogDataByteID:
			x, err := pglogrepl.ParseXLogData(m.Data[1:])
			if err != nil {
				return fmt.Errorf("xlog data: %w", err)
			}
			return s.xlog(x)
		}
	case *pgproto3.ErrorResponse:
		return fmt.Errorf("replication stream: %s (%s)", m.Message, m.Code)
	}
	return nil
}

// xlog decodes one pgoutput message; a commit queues its transaction's inserts.
func (s *session) xlog(x pglogrepl.XLogData) error {
	ev, err := s.d.decode(x.WALData, x.WALStart)
	if err != nil {
		return err
	}
	switch {
	case ev.commit:
		s.q.commit(ev.end, ev.ids, ev.aggs)
		if len(ev.ids) > 0 {
			s.lastWork = time.Now()
			s.f.m.CDCDelivered.Add(float64(len(ev.ids)))
			s.f.signal()
		}
	case ev.idle:
		s.lastWork = time.Now()
		s.q.idle(ev.end)
	}
	if n := s.d.undecodable; n > 0 {
		s.d.undecodable = 0
		s.f.o.Log.Info("inserts without an event id could not be claimed from the stream; polling publishes them",
			"rows", n, "table", s.f.o.Table.String())
	}
	return nil
}

// joinAgg is the queue's aggregate key.
func joinAgg(typ, id string) string { return typ + "\x00" + id }
