// Package replslot makes, reads and drops a pipeline's logical-replication slot and
// publication. Under the operator, it alone makes and drops them (the relay workers
// only stream from the slot), so no worker still shutting down can re-create a slot
// the operator just dropped; a worker run by hand makes its own (relayworker/cdc). A
// slot nobody reads keeps its WAL until the disk fills, so the operator drops it when
// the pipeline is deleted or leaves LogicalReplication mode.
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

// Read returns the slot, or found false when there is none.
func Read(ctx context.Context, db *sql.DB, slot string) (s Slot, found bool, err error) {
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

// Ensure makes the publication (inserts of the outbox table only: the relay's own
// updates never come back through the slot) and the slot when they are missing, and
// replaces a slot PostgreSQL invalidated (max_slot_wal_keep_size): its WAL is gone,
// and the rows committed meanwhile are PENDING in the table, where polling claims them
// after the hand-over age. It returns the slot's confirmed position.
func Ensure(ctx context.Context, db *sql.DB, t pgident.Table, slot, publication string) (confirmed string, replaced bool, err error) {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_publication WHERE pubname = $1`, publication).Scan(&n); err != nil {
		return "", false, fmt.Errorf("publication %s: %w", publication, err)
	}
	if n == 0 {
		// Names are validated against [a-z0-9_] (config) and quoted; the table is quoted too.
		if _, err := db.ExecContext(ctx, `CREATE PUBLICATION `+pgident.Quote(publication)+` FOR TABLE `+t.Qualified()+
			` WITH (publish = 'insert')`); err != nil {
			return "", false, fmt.Errorf("create publication %s (needs ownership of %s): %w", publication, t, err)
		}
	}
	var walStatus, pos sql.NullString
	err = db.QueryRowContext(ctx, `SELECT wal_status, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).
		Scan(&walStatus, &pos)
	switch {
	case err == sql.ErrNoRows:
	case err != nil:
		return "", false, fmt.Errorf("slot %s: %w", slot, err)
	case walStatus.String == "lost":
		if _, err := db.ExecContext(ctx, `SELECT pg_drop_replication_slot($1)`, slot); err != nil {
			return "", false, fmt.Errorf("drop invalidated slot %s: %w", slot, err)
		}
		replaced = true
	default:
		return pos.String, false, nil
	}
	if err := db.QueryRowContext(ctx, `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')`, slot).Scan(&pos); err != nil {
		return "", replaced, fmt.Errorf("create slot %s (needs the REPLICATION attribute and wal_level=logical): %w", slot, err)
	}
	return pos.String, replaced, nil
}

// Drop removes the slot and the publication, ending a reader that still holds the
// slot first. Both may be missing already.
func Drop(ctx context.Context, db *sql.DB, slot, publication string) error {
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
	if _, err := db.ExecContext(ctx, `DROP PUBLICATION IF EXISTS `+pgident.Quote(publication)); err != nil {
		return fmt.Errorf("drop publication %s: %w", publication, err)
	}
	return nil
}
