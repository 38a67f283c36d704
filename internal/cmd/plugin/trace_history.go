// trace_history.go: `kubectl outbox trace` of events written before a table was
// upgraded to contract v2 (docs/operations.md, "The v1 history after an upgrade").
// The upgrade renames the v1 table aside to <table>_v1 (and v1's archive to
// <table>_v1_archive) and leaves its rows as they were; the rows with work are
// copied to the v2 hold table, and so are in the v2 status view, but the SENT
// history, with its partitions and offsets, is only in the v1 table.

package plugin

import (
	"context"
	"database/sql"
	"errors"
	"math"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// historyTable is the v1 table an upgrade of t to contract v2 renamed aside.
func historyTable(t pgident.Table) pgident.Table { return t.WithSuffix(schema.AsideSuffix) }

// findInHistory reads an event that is not in the v2 table t from its v1 history:
// <table>_v1, then <table>_v1_archive. nil when it is in neither, or when there is no
// such table (t was made as v2, or the history was dropped): as for a missing
// archive, that is "not there", not an error.
func findInHistory(ctx context.Context, tx *sql.Tx, t pgident.Table, id string) (*eventRow, error) {
	aside := historyTable(t)
	r, err := findEvent(ctx, tx, aside, id)
	if errors.Is(err, errTableMissing) {
		r, err = nil, nil
	}
	if err != nil || r != nil {
		return r, err
	}
	return findArchived(ctx, tx, aside, id)
}

// historyWhere says which table of the v1 history loc's row came from.
func historyWhere(loc location) string {
	where := loc.rowTable()
	if loc.archived() {
		where = loc.archiveTable()
	}
	return where.String() + " (moved aside by the upgrade to contract v2)"
}

// historyStatus qualifies the status of a row from the v1 history that was not SENT:
// it stopped at the upgrade (no v1 worker writes the renamed table), and what became
// of the event since is the v2 relay's, which took the rows with work over through
// the hold table.
func historyStatus(loc location) string {
	if !loc.history || loc.row.Status == schema.StatusSent {
		return ""
	}
	return " as of the upgrade (rows with work were copied to " +
		loc.table.WithSuffix(schema.HoldSuffix).String() + " and relayed by v2 from there)"
}

// aggregateHistory lists the versions of aggregate typ/id older than rows (the v2
// table t's newest versions, in version order) from the v1 history, in version order,
// so that both lists together are the newest limit versions: none once rows fill the
// limit, and only versions below the lowest of rows (the v2 table's unique version
// index does not see the history, so a producer may have written a version again).
// nil when there is no history table.
func aggregateHistory(ctx context.Context, tx *sql.Tx, t pgident.Table, typ, id string, rows []eventRow, limit int) ([]eventRow, error) {
	if len(rows) >= limit {
		return nil, nil
	}
	aside := historyTable(t)
	ok, err := exists(ctx, tx, aside)
	if err != nil || !ok {
		return nil, err
	}
	below := int64(math.MaxInt64)
	if len(rows) > 0 {
		below = rows[0].AggregateVersion
	}
	return aggregateRowsV1(ctx, tx, aside, typ, id, below, limit-len(rows))
}
