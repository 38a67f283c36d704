// trace_v2_archive.go: `kubectl outbox trace` of an event that retention moved out
// of a table of contract v2 (docs/contract-v2.md, "As built: operator and
// retention"). `relayworker archive` copies into <table>_archive the outbox rows
// every cursor had passed (state PASSED) and the DEAD hold rows past the dead
// retention (state DEAD, with attempts and the error); the status view no longer
// has either.

package plugin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// traceV2ArchiveSQL reads the newest archive row of event $1 (the archive is indexed
// on event_id; an event has two rows when its outbox row went PASSED and its hold
// row went DEAD later) shaped as a status view row, the state as its status, and,
// for a PASSED row, the batch log row that published it by the same walk as the
// trace of a SENT event. A PASSED row the advance copied to the hold table is in no
// window batch; if it was sent from the hold table later, a batch row of no shard
// lists it, which the walk reads too. The archive keeps no next retry, and attempts
// only for DEAD rows (an outbox row has none): 0 for PASSED, never printed.
func traceV2ArchiveSQL(t pgident.Table) string {
	return `SELECT ` + v2TraceColumns + `, s.archived_at
FROM (SELECT event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key,
             created_at, shard, seq, state AS status, COALESCE(attempts, 0) AS attempts, last_error_code,
             NULL::timestamptz AS next_attempt_at, archived_at
      FROM ` + t.WithSuffix(schema.ArchiveSuffix).Qualified() + `
      WHERE event_id = $1
      ORDER BY archived_at DESC
      LIMIT 1) s
` + publishingBatch(t, `s.status = '`+schema.ArchivePassed+`'`)
}

// findV2Archived reads the event from the v2 archive of t; nil when it is not there.
// No v2 archive (Delete-mode retention; a table migrated before the archive existed;
// a v1 archive left under the name) is "not there", as findArchived treats a missing
// v1 archive: `relayworker archive` writes only into an archive with the v2 columns
// (schema.HasV2Archive), so no other table under the name holds v2 events.
func findV2Archived(ctx context.Context, tx *sql.Tx, t pgident.Table, id string) (*v2Row, error) {
	at := t.WithSuffix(schema.ArchiveSuffix)
	ok, err := schema.HasV2Archive(ctx, tx, t)
	if err != nil || !ok {
		return nil, err
	}
	var r v2Row
	err = tx.QueryRowContext(ctx, traceV2ArchiveSQL(t), id).Scan(append(r.targets(), &r.ArchivedAt)...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read event %q from %s: %w", id, at, err)
	}
	return &r, nil
}

// v2ArchivedState says what an archive row's state means.
func v2ArchivedState(r *v2Row) string {
	if r.Status == schema.ArchiveDead {
		return "state DEAD: a DEAD hold row past the dead retention"
	}
	return "state PASSED: every cursor had passed it"
}
