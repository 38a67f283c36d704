package plugin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	_ "github.com/lib/pq" // database/sql driver "postgres"

	"github.com/outbox-operator/outbox-operator/internal/pgerr"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/redact"
)

// database is one connection used by a trace. Every read runs in a read-only
// transaction with a statement timeout: the plugin can never change a row, and a
// slow database costs one bounded wait.
type database struct {
	db      *sql.DB
	dsn     string // only for redacting errors
	src     dsnSource
	timeout time.Duration
}

// connect opens and pings the database; the error names the Secret, never the DSN.
func connect(ctx context.Context, dsn string, src dsnSource, timeout time.Duration) (*database, error) {
	d := &database{dsn: dsn, src: src, timeout: timeout}
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		return nil, fmt.Errorf("%s: the DSN in %s is not usable: %s", src.owner, src, d.clean(err))
	}
	db.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: cannot reach the database with the DSN from %s: %s", src.owner, src, d.clean(err))
	}
	d.db = db
	return d, nil
}

func (d *database) Close() error { return d.db.Close() }

// clean is err's text without the DSN or its password, with the timeout spelled out.
func (d *database) clean(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", d.timeout)
	}
	return redact.DSN(err.Error(), d.dsn)
}

// read runs fn in a read-only transaction bounded by the timeout. Errors start with
// the DSN's owner ("pipeline orders: ...") and wrap fn's error.
func (d *database) read(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("%s: database from %s: %s", d.src.owner, d.src, d.clean(err))
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	ms := d.timeout.Milliseconds()
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`SET LOCAL statement_timeout = %d`, ms)); err != nil {
		return fmt.Errorf("%s: database from %s: %s", d.src.owner, d.src, d.clean(err))
	}
	if err := fn(ctx, tx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) || pgerr.Is(err, pgerr.QueryCanceled) {
			return fmt.Errorf("%s: database from %s: no answer within %s", d.src.owner, d.src, d.timeout)
		}
		// Belt and braces: no driver message should quote the DSN, but none may.
		if msg := redact.DSN(err.Error(), d.dsn); msg != err.Error() {
			return fmt.Errorf("%s: %s", d.src.owner, msg)
		}
		return fmt.Errorf("%s: %w", d.src.owner, err)
	}
	return nil
}

// exists reports whether table t exists (to_regclass never fails on a missing
// table, so the transaction stays usable).
func exists(ctx context.Context, tx *sql.Tx, t pgident.Table) (bool, error) {
	var ok bool
	err := tx.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, t.Qualified()).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("check table %s: %w", t, err)
	}
	return ok, nil
}
