// database.go: the one PostgreSQL database every pipeline uses: a private server,
// the applications' role (password login), one outbox table per pipeline made with the
// relay's own migrate (internal/schema), and the operator's connections as
// pg_stat_activity shows them.

package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"

	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
)

// Roles: every pipeline's DSN logs in as appRole, except the password probe's
// pipeline, which has rotRole to itself so its rotation touches no other pipeline.
const (
	dbName  = "shop"
	appRole = "app"
	rotRole = "rotating"
)

type database struct {
	pg    *pgtest.Server
	super *sql.DB // superuser on dbName
}

func startDatabase() (*database, error) {
	hba := []string{"host all " + appRole + " 127.0.0.1/32 scram-sha-256", "host all " + rotRole + " 127.0.0.1/32 scram-sha-256"}
	pg, err := pgtest.Start(pgtest.Options{HBAFirst: hba})
	if err != nil {
		return nil, err
	}
	d := &database{pg: pg}
	admin, err := sql.Open("postgres", pg.DSN("postgres"))
	if err != nil {
		return d, err
	}
	defer admin.Close()
	for _, q := range []string{
		`CREATE DATABASE ` + dbName,
		`CREATE ROLE ` + appRole + ` LOGIN PASSWORD 'app-password-1'`,
		`CREATE ROLE ` + rotRole + ` LOGIN PASSWORD 'rot-password-1'`,
	} {
		if _, err := admin.Exec(q); err != nil {
			return d, fmt.Errorf("%s: %w", q, err)
		}
	}
	d.super, err = sql.Open("postgres", pg.DSN(dbName))
	return d, err
}

func (d *database) stop() {
	if d.super != nil {
		d.super.Close()
	}
	if d.pg != nil {
		_ = d.pg.Stop()
	}
}

// dsn is what a pipeline's Secret holds for role with password.
func (d *database) dsn(role, password string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(role, password), Host: fmt.Sprintf("127.0.0.1:%d", d.pg.Port),
		Path: "/" + dbName, RawQuery: "sslmode=disable"}
	return u.String()
}

// migrate creates the tables (4 at a time, as init containers starting together
// would) and lets both roles read and write them.
func (d *database) migrate(ctx context.Context, tables []pgident.Table) error {
	d.super.SetMaxOpenConns(4)
	if err := forEach(4, tables, func(t pgident.Table) error { return schema.Migrate(ctx, d.super, t, schema.Options{}) }); err != nil {
		return err
	}
	q := `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ` + appRole + `, ` + rotRole
	_, err := d.super.ExecContext(ctx, q)
	return err
}

// operatorConnections counts the manager's connections (its application_name).
func (d *database) operatorConnections(ctx context.Context) (int, error) {
	var n int
	err := d.super.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`,
		outboxstats.ApplicationName).Scan(&n)
	return n, err
}

// rotate gives role a new password and ends its sessions, so the old password is no
// use any more, also to connections that logged in with it.
func (d *database) rotate(ctx context.Context, role, password string) error {
	if _, err := d.super.ExecContext(ctx, `ALTER ROLE `+pgident.Quote(role)+` PASSWORD '`+strings.ReplaceAll(password, "'", "''")+`'`); err != nil {
		return err
	}
	_, err := d.super.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, role)
	return err
}
