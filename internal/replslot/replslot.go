// Package replslot creates, reads and drops a pipeline's logical-replication slot and
// publication. It runs the statements and decides nothing: what to create, replace or
// drop is the caller's decision (the operator: slotAction in
// internal/controller/outboxpipeline_slot_plan.go; a worker run by hand: internal/relayworker/cdc).
// Under the operator, the operator alone makes and drops them (the relay workers only
// stream from the slot), so no worker still shutting down can re-create a slot the
// operator just dropped. A slot nobody reads keeps its WAL until the disk fills, so
// the operator drops it when the pipeline is deleted or leaves LogicalReplication mode.
package replslot

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// Slot is a slot as pg_replication_slots reports it.
type Slot struct {
	Active       bool
	ConfirmedLSN string
	// LagBytes is the WAL the slot holds back: pg_current_wal_lsn() - restart_lsn.
	LagBytes  int64
	WALStatus string
}

// Lost reports whether PostgreSQL invalidated the slot (max_slot_wal_keep_size): its
// WAL is gone, and it can never be streamed from again.
func (s Slot) Lost() bool { return s.WALStatus == "lost" }

// State is what Read saw of a slot and its publication.
type State struct {
	SlotFound bool
	Slot      Slot
	// PublicationFound is false while the publication is missing; Tables are what it
	// covers ("schema.table", sorted).
	PublicationFound bool
	Tables           []string
}

// Read reads the slot and the publication.
func Read(ctx context.Context, db *sql.DB, slot, publication string) (State, error) {
	s, found, err := readSlot(ctx, db, slot)
	if err != nil {
		return State{}, err
	}
	tables, pubFound, err := publicationTables(ctx, db, publication)
	if err != nil {
		return State{}, err
	}
	return State{SlotFound: found, Slot: s, PublicationFound: pubFound, Tables: tables}, nil
}

// readSlot returns the slot, or found false when there is none.
func readSlot(ctx context.Context, db *sql.DB, slot string) (s Slot, found bool, err error) {
	var confirmed, walStatus sql.NullString
	var lag sql.NullInt64
	err = db.QueryRowContext(ctx, `SELECT active, confirmed_flush_lsn::text,
		pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, wal_status
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&s.Active, &confirmed, &lag, &walStatus)
	if errors.Is(err, sql.ErrNoRows) {
		return Slot{}, false, nil
	}
	if err != nil {
		return Slot{}, false, fmt.Errorf("read slot %s: %w", slot, err)
	}
	s.ConfirmedLSN, s.LagBytes, s.WALStatus = confirmed.String, lag.Int64, walStatus.String
	return s, true, nil
}

// CreatePublication makes the publication of inserts into t only: the relay's own
// updates never come back through the slot.
func CreatePublication(ctx context.Context, db *sql.DB, publication string, t pgident.Table) error {
	// Names are validated against [a-z0-9_] (config) and quoted; the table is quoted too.
	if _, err := db.ExecContext(ctx, `CREATE PUBLICATION `+pgident.Quote(publication)+` FOR TABLE `+t.Qualified()+
		` WITH (publish = 'insert')`); err != nil {
		return fmt.Errorf("create publication %s (needs ownership of %s): %w", publication, t, err)
	}
	return nil
}

// CreateSlot makes the slot (pgoutput) and returns its confirmed position. The rows
// committed before it are not in its stream: they are PENDING in the table, where
// polling claims them after the hand-over age.
func CreateSlot(ctx context.Context, db *sql.DB, slot string) (confirmed string, err error) {
	var pos sql.NullString
	if err := db.QueryRowContext(ctx, `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')`, slot).Scan(&pos); err != nil {
		return "", fmt.Errorf("create slot %s (needs the REPLICATION attribute and wal_level=logical): %w", slot, err)
	}
	return pos.String, nil
}

// Drop removes the slot (DropSlot) and the publication. Both may be missing already.
func Drop(ctx context.Context, db *sql.DB, slot, publication string) error {
	if err := DropSlot(ctx, db, slot); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `DROP PUBLICATION IF EXISTS `+pgident.Quote(publication)); err != nil {
		return fmt.Errorf("drop publication %s: %w", publication, err)
	}
	return nil
}

// DropSlot removes the slot, ending a reader that still holds it first. It may be
// missing already.
func DropSlot(ctx context.Context, db *sql.DB, slot string) error {
	if _, err := db.ExecContext(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
		WHERE slot_name = $1 AND active_pid IS NOT NULL`, slot); err != nil {
		return fmt.Errorf("end the reader of slot %s: %w", slot, err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&n); err != nil {
		return fmt.Errorf("slot %s: %w", slot, err)
	}
	// The terminated walsender lets go of the slot a moment later.
	for attempt := 0; n > 0; attempt++ {
		_, err := db.ExecContext(ctx, `SELECT pg_drop_replication_slot($1)`, slot)
		if err == nil {
			break
		}
		if attempt == 20 || ctx.Err() != nil {
			return fmt.Errorf("drop slot %s: %w", slot, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
	return nil
}
