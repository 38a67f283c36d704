package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// Outcome says what Handle did with a message. Every outcome is safe to ack.
type Outcome int

const (
	// Applied: first delivery; the handler ran and its transaction committed.
	Applied Outcome = iota + 1
	// Duplicate: this consumer group already handled the event; nothing ran.
	Duplicate
	// Stale: a newer version of the aggregate was already applied; nothing ran.
	Stale
)

func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case Duplicate:
		return "duplicate"
	case Stale:
		return "stale"
	}
	return "unknown"
}

// ErrPayloadConflict: the event id was seen before with different content.
var ErrPayloadConflict = errors.New("inbox: same event id, different content")

// HandlerFunc applies one event inside tx. Its return value is stored as result_ref
// (e.g. the id of the row it created) so duplicates can report the first result.
type HandlerFunc func(ctx context.Context, tx *sql.Tx, m Message) (resultRef string, err error)

// Store keeps one consumer group's dedup rows (message_consume) and per-aggregate
// last applied versions.
type Store struct {
	db      *sql.DB
	group   string
	consume string // quoted schema.message_consume
	version string // quoted schema.message_consume_version
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
	return &Store{
		db:      db,
		group:   group,
		consume: pgident.Quote(schemaName) + "." + pgident.Quote(schema.ConsumeTable),
		version: pgident.Quote(schemaName) + "." + pgident.Quote(VersionTable),
	}, nil
}

// Migrate creates the consumer tables in schemaName (idempotent).
func Migrate(ctx context.Context, db *sql.DB, schemaName string) error {
	if err := pgident.Validate("schema", schemaName); err != nil {
		return fmt.Errorf("inbox: %w", err)
	}
	s := pgident.Quote(schemaName)
	stmts := []string{
		`CREATE SCHEMA IF NOT EXISTS ` + s,
		schema.ConsumeTableDDL(schemaName),
		`CREATE TABLE IF NOT EXISTS ` + s + `.` + pgident.Quote(VersionTable) + ` (
    consumer_group text   NOT NULL,
    aggregate_type text   NOT NULL,
    aggregate_id   text   NOT NULL,
    last_version   bigint NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, aggregate_type, aggregate_id)
)`,
	}
	for _, stmt := range stmts {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("inbox migrate: %w", err)
		}
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
//  4. Run fn, mark the row SUCCESS, commit. Only then may the caller ack the message.
//
// An error from fn rolls everything back, so the redelivery starts clean.
func (s *Store) Handle(ctx context.Context, m Message, fn HandlerFunc) (Outcome, error) {
	if m.EventID == "" {
		return 0, fmt.Errorf("%w: empty event id", ErrInvalidMessage)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("inbox: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit

	hash := m.RequestHash()
	res, err := tx.ExecContext(ctx, `INSERT INTO `+s.consume+
		` (consumer_group, event_id, event_type, request_hash, status) VALUES ($1, $2, $3, $4, 'PROCESSING')
		 ON CONFLICT (consumer_group, event_id) DO NOTHING`, s.group, m.EventID, m.EventType, hash)
	if err != nil {
		return 0, fmt.Errorf("inbox: claim event %s: %w", m.EventID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var prevHash string
		if err := tx.QueryRowContext(ctx, `SELECT request_hash FROM `+s.consume+
			` WHERE consumer_group = $1 AND event_id = $2`, s.group, m.EventID).Scan(&prevHash); err != nil {
			return 0, fmt.Errorf("inbox: read event %s: %w", m.EventID, err)
		}
		if prevHash != hash {
			return 0, fmt.Errorf("%w: event %s", ErrPayloadConflict, m.EventID)
		}
		return Duplicate, nil
	}

	status, outcome := "SUCCESS", Applied
	fresh, err := s.advanceVersion(ctx, tx, m)
	if err != nil {
		return 0, err
	}
	ref := ""
	if fresh {
		if ref, err = fn(ctx, tx, m); err != nil {
			return 0, fmt.Errorf("inbox: handle event %s: %w", m.EventID, err)
		}
	} else {
		status, outcome = "STALE", Stale
	}
	if _, err := tx.ExecContext(ctx, `UPDATE `+s.consume+` SET status = $3, result_ref = NULLIF($4, ''), updated_at = now()
		WHERE consumer_group = $1 AND event_id = $2`, s.group, m.EventID, status, ref); err != nil {
		return 0, fmt.Errorf("inbox: mark event %s: %w", m.EventID, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("inbox: commit event %s: %w", m.EventID, err)
	}
	return outcome, nil
}

// advanceVersion reports whether m is newer than the aggregate's last applied version
// (and records it). Messages without an aggregate id are not version-guarded.
func (s *Store) advanceVersion(ctx context.Context, tx *sql.Tx, m Message) (bool, error) {
	if m.AggregateID == "" {
		return true, nil
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO `+s.version+` AS v (consumer_group, aggregate_type, aggregate_id, last_version)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (consumer_group, aggregate_type, aggregate_id)
		DO UPDATE SET last_version = EXCLUDED.last_version, updated_at = now()
		WHERE v.last_version < EXCLUDED.last_version`, s.group, m.AggregateType, m.AggregateID, m.AggregateVersion)
	if err != nil {
		return false, fmt.Errorf("inbox: version guard for event %s: %w", m.EventID, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}
