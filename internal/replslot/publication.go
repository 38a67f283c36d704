package replslot

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// publicationTables returns the tables the publication covers as "schema.table",
// sorted, or found false when there is no publication of that name.
func publicationTables(ctx context.Context, db *sql.DB, publication string) (tables []string, found bool, err error) {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_publication WHERE pubname = $1`, publication).Scan(&n); err != nil {
		return nil, false, fmt.Errorf("publication %s: %w", publication, err)
	}
	if n == 0 {
		return nil, false, nil
	}
	rows, err := db.QueryContext(ctx, `SELECT schemaname || '.' || tablename FROM pg_publication_tables
		WHERE pubname = $1 ORDER BY 1`, publication)
	if err != nil {
		return nil, true, fmt.Errorf("tables of publication %s: %w", publication, err)
	}
	defer rows.Close()
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, true, fmt.Errorf("tables of publication %s: %w", publication, err)
		}
		tables = append(tables, t)
	}
	if err := rows.Err(); err != nil {
		return nil, true, fmt.Errorf("tables of publication %s: %w", publication, err)
	}
	return tables, true, nil
}

// CoversExactly reports whether tables (State.Tables) is t and nothing else.
func CoversExactly(tables []string, t pgident.Table) bool {
	return len(tables) == 1 && tables[0] == t.String()
}

// SetPublicationTable makes the publication cover t and nothing else (ALTER
// PUBLICATION ... SET TABLE; its publish = 'insert' option stays). The slot is kept:
// a slot is a position in the WAL, not in one table, and the reader skips inserts of
// any table but its own (internal/relayworker/cdc), so it neither needs nor wants a new one.
func SetPublicationTable(ctx context.Context, db *sql.DB, publication string, t pgident.Table) error {
	// The publication's name is validated against [a-z0-9_] (config) and quoted; the
	// table was validated by pgident.NewTable and is quoted by Qualified.
	if _, err := db.ExecContext(ctx, `ALTER PUBLICATION `+pgident.Quote(publication)+` SET TABLE `+t.Qualified()); err != nil {
		return fmt.Errorf("move publication %s to %s (needs ownership of both): %w", publication, t, err)
	}
	return nil
}
