package payments

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outbox-operator/outbox-operator/inbox"
)

// Schema holds the example's business tables and its consumers' inbox tables.
const Schema = "payments"

// ddl creates the tables of the shop (orders) and of the three consumers.
var ddl = []string{
	`CREATE SCHEMA IF NOT EXISTS payments`,
	// The shop's orders: version is the aggregate version its events carry.
	`CREATE TABLE IF NOT EXISTS payments.orders (
    order_id     text        PRIMARY KEY,
    user_id      text        NOT NULL,
    amount_cents bigint      NOT NULL CHECK (amount_cents > 0),
    currency     text        NOT NULL,
    phone        text        NOT NULL,
    status       text        NOT NULL CHECK (status IN ('PENDING', 'PAID')),
    version      bigint      NOT NULL,
    payment_id   text        NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    paid_at      timestamptz NULL
)`,
	// The points service: a balance per user and a ledger row per credit.
	`CREATE TABLE IF NOT EXISTS payments.user_points (
    user_id    text        PRIMARY KEY,
    balance    bigint      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
)`,
	// No UNIQUE (order_id) on purpose: the inbox is what makes a credit happen once,
	// and a double credit must show up in Reconcile rather than as a constraint
	// error. A real ledger would add it as a second line of defence.
	`CREATE TABLE IF NOT EXISTS payments.points_ledger (
    credit_id  bigserial   PRIMARY KEY,
    order_id   text        NOT NULL,
    user_id    text        NOT NULL,
    event_id   text        NOT NULL,
    points     bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
)`,
	`CREATE INDEX IF NOT EXISTS points_ledger_order_idx ON payments.points_ledger (order_id)`,
	// The search service's projection: one row per order, at the newest version seen.
	`CREATE TABLE IF NOT EXISTS payments.order_search (
    order_id             text        PRIMARY KEY,
    user_id              text        NOT NULL,
    status               text        NOT NULL,
    amount_cents         bigint      NOT NULL,
    currency             text        NOT NULL,
    last_applied_version bigint      NOT NULL,
    updated_at           timestamptz NOT NULL DEFAULT now()
)`,
}

// Migrate creates the example's tables and the inbox tables in Schema (idempotent).
// The outbox table itself is the relay's: `relayworker migrate` (or the pipeline's
// spec.source.migrate) creates it.
func Migrate(ctx context.Context, db *sql.DB) error {
	for _, stmt := range ddl {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("payments: migrate: %w", err)
		}
	}
	if err := inbox.Migrate(ctx, db, Schema); err != nil {
		return fmt.Errorf("payments: %w", err)
	}
	return nil
}
