package cli

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	_ "github.com/lib/pq" // driver "postgres"

	"github.com/outbox-operator/outbox-operator/internal/pgversion"
	"github.com/outbox-operator/outbox-operator/internal/redact"
)

// openDB opens and pings the database and refuses a PostgreSQL version outside the
// supported range (every subcommand starts here, so an unsupported server fails with
// that one line, not with an SQL error later); the error never contains the DSN or
// its password (a DSN parse error can quote the whole DSN).
func openDB(ctx context.Context, dsn string, maxConns int) (*sql.DB, error) {
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		return nil, fmt.Errorf("database DSN is not valid: %s", redact.DSN(err.Error(), dsn))
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("database unreachable: %s", redact.DSN(err.Error(), dsn))
	}
	if err := pgversion.CheckServer(pctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}
