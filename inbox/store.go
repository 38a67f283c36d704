package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// Outcome says what happened to a message. Every outcome is safe to ack.
type Outcome int

const (
	// Applied: first delivery; the handler ran and its transaction committed.
	Applied Outcome = iota + 1
	// Duplicate: this consumer group already handled the event; nothing ran.
	Duplicate
	// Stale: a newer version of the aggregate was already applied; nothing ran.
	Stale
	// Gap: applied, but the aggregate's version skipped ahead of last applied + 1: the
	// versions in between have not been seen (yet) by this consumer group.
	Gap
	// Parked: the message could not be handled; it is in the parking table with its
	// reason, and later messages flow.
	Parked
)

func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case Duplicate:
		return "duplicate"
	case Stale:
		return "stale"
	case Gap:
		return "gap"
	case Parked:
		return "parked"
	}
	return "unknown"
}

// ErrPayloadConflict: the event id was seen before with different content.
var ErrPayloadConflict = errors.New("inbox: same event id, different content")

// HandlerFunc applies one event inside tx. Its return value is stored as result_ref
// (e.g. the id of the row it created) so duplicates can report the first result.
// Wrap a returned error with Retryable, Permanent or Waiting to choose what the
// consumer does with it (an unwrapped error is Retryable).
type HandlerFunc func(ctx context.Context, tx *sql.Tx, m Message) (resultRef string, err error)

// Store keeps one consumer group's dedup rows (message_consume), per-aggregate last
// applied versions and parked messages.
type Store struct {
	db      *sql.DB
	group   string
	consume string // quoted schema.message_consume
	version string // quoted schema.message_consume_version
	parked  string // quoted schema.message_consume_parked
	replays string // quoted schema.message_consume_replay

	prepMu sync.Mutex // guards stmts, prepared on first use
	stmts  prepared
}

// VersionTable is the table of last applied aggregate versions per consumer group.
const VersionTable = "message_consume_version"

// New returns a Store for consumer group `group` using tables in schemaName.
func New(db *sql.DB, schemaName, group string) (*Store, error) {
	if group == "" {
		return nil, errors.New("inbox: consumer group is empty")
	}
	if err := pgident.Validate("schema", schemaName); err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	q := func(table string) string { return pgident.Quote(schemaName) + "." + pgident.Quote(table) }
	return &Store{
		db: db, group: group,
		consume: q(schema.ConsumeTable), version: q(VersionTable),
		parked: q(ParkedTable), replays: q(ReplayTable),
	}, nil
}

// Group is the consumer group the Store records for.
func (s *Store) Group() string { return s.group }

// Migrate creates the consumer tables in schemaName (idempotent). It is safe to run
// from several consumers at once and alongside `relayworker migrate` in the same
// schema: the statements run in one transaction under the schema's DDL lock
// (schema.MigrateShared), which the relay's migrate takes too for message_consume.
func Migrate(ctx context.Context, db *sql.DB, schemaName string) error {
	if err := pgident.Validate("schema", schemaName); err != nil {
		return fmt.Errorf("inbox: %w", err)
	}
	s := pgident.Quote(schemaName)
	stmts := append(schema.SharedStatements(schemaName),
		`CREATE TABLE IF NOT EXISTS `+s+`.`+pgident.Quote(VersionTable)+` (
    consumer_group text   NOT NULL,
    aggregate_type text   NOT NULL,
    aggregate_id   text   NOT NULL,
    last_version   bigint NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, aggregate_type, aggregate_id)
)`)
	stmts = append(stmts, parkedDDL(s)...)
	stmts = append(stmts, commandDDL(s)...)
	if err := schema.MigrateShared(ctx, db, schemaName, stmts); err != nil {
		return fmt.Errorf("inbox migrate: %w", err)
	}
	return nil
}

// Handle runs fn at most once per (consumer group, event id), in one transaction with
// the dedup row and the aggregate-version guard:
//
//  1. INSERT the dedup row first, under its primary key (never check-then-insert: two
//     concurrent deliveries would both see "absent"). A concurrent duplicate blocks on
//     the key until the first commits, then finds the row.
//  2. If the row existed: same content -> Duplicate; different -> ErrPayloadConflict.
//  3. Advance the aggregate's last applied version only if this one is newer; an older
//     or equal version is Stale and the business change is skipped.
//  4. Run fn, record its result, commit. Only then may the caller ack the message.
//
// Steps 1 to 3 are one statement (claimSQL). An error from fn rolls everything back,
// so the redelivery starts clean. Handle does not retry or park: Consumer does.
func (s *Store) Handle(ctx context.Context, m Message, fn HandlerFunc) (Outcome, error) {
	return s.handle(ctx, m, fn, false)
}

// handle is Handle; with waitGaps a version gap rolls back as a Waiting error instead
// of being applied.
func (s *Store) handle(ctx context.Context, m Message, fn HandlerFunc, waitGaps bool) (Outcome, error) {
	return s.handleThen(ctx, m, fn, waitGaps, nil)
}

// handleThen is handle with then (if not nil) run in the same transaction before the
// commit, whatever the outcome (a replay marks its parked row there).
func (s *Store) handleThen(ctx context.Context, m Message, fn HandlerFunc, waitGaps bool, then func(*sql.Tx) error) (Outcome, error) {
	if m.EventID == "" {
		return 0, fmt.Errorf("%w: empty event id", ErrInvalidMessage)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, storeErr("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	c, err := s.claimOne(ctx, tx, m)
	if err != nil {
		return 0, err
	}
	switch {
	case c.outcome == Duplicate:
		if err := s.commitThen(tx, then, m); err != nil {
			return 0, err
		}
		return c.outcome, nil
	case c.outcome == Gap && waitGaps:
		return 0, Waiting(fmt.Errorf("%w: event %s is version %d of %s/%s, last applied %d",
			errVersionGap, m.EventID, m.AggregateVersion, m.AggregateType, m.AggregateID, c.prevVersion))
	}
	ref := ""
	if c.outcome != Stale {
		if ref, err = callHandler(ctx, tx, m, fn); err != nil {
			return 0, &handlerError{eventID: m.EventID, err: err}
		}
	}
	if err := s.finish(ctx, tx, []finishRow{{m.EventID, c.outcome == Stale, ref}}); err != nil {
		return 0, err
	}
	if err := s.commitThen(tx, then, m); err != nil {
		return 0, err
	}
	return c.outcome, nil
}

func (s *Store) commitThen(tx *sql.Tx, then func(*sql.Tx) error, m Message) error {
	if then != nil {
		if err := then(tx); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return storeErr("commit event %s: %w", m.EventID, err)
	}
	return nil
}

// callHandler runs fn and turns a panic into a permanent error: a handler that
// panics on a message will panic on it again, and the process must not die for it.
// The panic value is not kept: it may quote the payload.
func callHandler(ctx context.Context, tx *sql.Tx, m Message, fn HandlerFunc) (ref string, err error) {
	defer func() {
		if p := recover(); p != nil {
			ref, err = "", fmt.Errorf("%w (%T)", errPanic, p)
		}
	}()
	return fn(ctx, tx, m)
}
