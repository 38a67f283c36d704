package schema

import (
	"context"
	"fmt"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// Archive states of a v2 archive row: which table the row left.
const (
	// ArchivePassed: an outbox row every cursor had passed (published, or copied
	// to the hold table by the advance that passed it).
	ArchivePassed = "PASSED"
	// ArchiveDead: a DEAD hold row past the dead retention.
	ArchiveDead = StatusDead
)

// HasV2Archive says whether t's archive table exists with the v2 columns: not a v1
// archive (one made before an upgrade renamed it aside has no shard column), nor a
// table of another shape under that name. The archive job refuses to write into
// anything else, and trace reads nothing else as a v2 archive.
func HasV2Archive(ctx context.Context, q queryer, t pgident.Table) (bool, error) {
	archive := t.WithSuffix(ArchiveSuffix)
	var ok bool
	if err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname = 'shard' AND NOT attisdropped)`, archive.Qualified()).Scan(&ok); err != nil {
		return false, fmt.Errorf("check %s: %w", archive, err)
	}
	return ok, nil
}

// v2ArchiveStatements are the tables `relayworker archive` uses on a v2 table
// (docs/contract-v2.md, "As built: operator and retention"): the archive, the run
// history (v1's), and the index its DEAD hold retention scans. The archive is
// written out column by column, not LIKE the outbox table: LIKE would copy seq's and
// txid's defaults (a nextval of the outbox's sequence) and the generated shard.
func v2ArchiveStatements(t pgident.Table, e EventTypes) []string {
	archive := t.WithSuffix(ArchiveSuffix).Qualified()
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + archive + ` (
    event_id           text        NOT NULL,
` + eventCopyColumns(e) + `    state              text        NOT NULL CHECK (state IN ('` + ArchivePassed + `', '` + ArchiveDead + `')),
    attempts           int         NULL,
    last_error_code    text        NULL,
    last_error_message text        NULL,
    archived_at        timestamptz NOT NULL DEFAULT now()
)`,
		`CREATE INDEX IF NOT EXISTS ` + t.Ident(ArchiveSuffix+"_event_idx") + ` ON ` + archive + ` (event_id)`,
		archiveRunsDDL(t),
		archiveRunsIndexDDL(t),
		// DEAD hold rows by age, for the dead retention (DEAD rows are few; the index
		// costs the relay nothing on the hot path, which writes no DEAD rows).
		`CREATE INDEX IF NOT EXISTS ` + t.Ident("_hold_dead") + ` ON ` + t.WithSuffix(HoldSuffix).Qualified() +
			` (updated_at) WHERE state = '` + StatusDead + `'`,
	}
}

// eventCopyColumns are the columns of a copy of a v2 event after its event_id (the
// producer's columns, created_at, and where it sat: txid, seq, shard), shared by the
// hold table and the archive, with the outbox table's payload and headers types;
// each line ends with a comma.
func eventCopyColumns(e EventTypes) string {
	return `    aggregate_type     text        NOT NULL,
    aggregate_id       text        NOT NULL,
    aggregate_version  bigint      NOT NULL,
    event_type         text        NOT NULL,
    event_version      int         NOT NULL,
    destination        text        NOT NULL,
    message_key        text        NOT NULL,
    payload            ` + e.column(e.Payload) + `NOT NULL,
    headers            ` + e.column(e.Headers) + `NULL,
    created_at         timestamptz NOT NULL,
    txid               xid8        NOT NULL,
    seq                bigint      NOT NULL,
    shard              smallint    NOT NULL,
`
}
