package outbox

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// MigrateOptions are the choices of Migrate.
type MigrateOptions struct {
	// NotifyTrigger installs the statement-level trigger that wakes the relay after
	// plain-SQL inserts (Publish wakes it itself); `relayworker migrate
	// --notify-trigger` is the same.
	NotifyTrigger bool
}

// Migrate creates (or completes) the outbox table of p, with its indexes and the side
// tables its schema shares: the DDL `relayworker migrate` runs (docs/worker-contract.md).
// It is idempotent and safe from several processes at once, so an application can run
// it at start, beside inbox.Migrate, instead of a migrate Job or init container.
func (p *Publisher) Migrate(ctx context.Context, db *sql.DB, opts MigrateOptions) error {
	if err := schema.Migrate(ctx, db, p.t, schema.Options{NotifyTrigger: opts.NotifyTrigger}); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}
