// Package pgversion is the PostgreSQL server range outbox-operator supports
// (docs/operations.md#supported-postgresql-versions) and the check that the relay,
// `relayworker migrate` and the operator make when they first reach a database, so an
// unsupported server fails with one line naming its version and the range instead of
// with an SQL error somewhere later.
package pgversion

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
)

// The supported major versions: the oldest and the newest `make test-pg-matrix` runs
// every PostgreSQL-facing suite against. A newer server is refused until it is tested.
const (
	MinMajor = 13
	MaxMajor = 18
)

// ErrUnsupported matches (errors.Is) every *UnsupportedError.
var ErrUnsupported = errors.New("unsupported PostgreSQL version")

// UnsupportedError says which server was refused and what is supported.
type UnsupportedError struct {
	Version    string // server_version, e.g. "12.18 (Debian 12.18-1)"
	VersionNum int    // server_version_num, e.g. 120018
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("PostgreSQL %s (server_version_num %d) is not supported: outbox-operator supports PostgreSQL %d to %d",
		e.Version, e.VersionNum, MinMajor, MaxMajor)
}

// Is makes errors.Is(err, ErrUnsupported) true.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// Major is the major version of a server_version_num (PostgreSQL 10 and later).
func Major(versionNum int) int { return versionNum / 10000 }

// ParseMajor reads the major version from a server_version string ("13.23",
// "16.4 (Debian 16.4-1.pgdg120+1)", "18beta1"): what a replication connection's
// ParameterStatus reports, where server_version_num is not sent.
func ParseMajor(serverVersion string) (int, error) {
	end := 0
	for end < len(serverVersion) && serverVersion[end] >= '0' && serverVersion[end] <= '9' {
		end++
	}
	m, err := strconv.Atoi(serverVersion[:end])
	if err != nil || m < 10 {
		return 0, fmt.Errorf("PostgreSQL server_version %q has no major version", serverVersion)
	}
	return m, nil
}

// Check decides whether a server is supported: nil when it is, else an
// *UnsupportedError.
func Check(versionNum int, version string) error {
	if m := Major(versionNum); m < MinMajor || m > MaxMajor {
		return &UnsupportedError{Version: version, VersionNum: versionNum}
	}
	return nil
}

// Querier is what CheckServer asks: *sql.DB, *sql.Conn and *sql.Tx all are one.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// CheckServer reads the server's version and checks it.
func CheckServer(ctx context.Context, db Querier) error {
	var num, version string
	err := db.QueryRowContext(ctx, `SELECT current_setting('server_version_num'), current_setting('server_version')`).Scan(&num, &version)
	if err != nil {
		return fmt.Errorf("read the PostgreSQL server version: %w", err)
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return fmt.Errorf("PostgreSQL server_version_num %q: %w", num, err)
	}
	return Check(n, version)
}
