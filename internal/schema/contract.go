// contract.go: which table contract an outbox table follows, read from the table
// itself (the relay picks its loop from it, the operator its status reader), and the
// v2 migrate.

package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgerr"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// Contract is what DetectContract found.
type Contract struct {
	// Version is ContractNone (no table), ContractV1 or ContractV2; a contract row may
	// also carry a version this build does not know (VerifyV2 refuses it).
	Version int
	// Shards is a v2 table's shard count (0 otherwise).
	Shards int
}

// queryer is a *sql.DB, *sql.Conn or *sql.Tx.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// DetectContract reads which contract table t follows: a v2 table has its
// <table>_contract row (the marker is a row, not a comment, so a tool that rewrites
// comments cannot turn a v2 table into a v1 one); a table without one and with v1's
// status column is v1.
func DetectContract(ctx context.Context, db *sql.DB, t pgident.Table) (Contract, error) {
	return detectContract(ctx, db, t)
}

// DetectContractTx is DetectContract inside tx (the operator's status read detects
// the contract in its read-only, time-bounded transaction). An error aborts tx.
func DetectContractTx(ctx context.Context, tx *sql.Tx, t pgident.Table) (Contract, error) {
	return detectContract(ctx, tx, t)
}

// detectContractSQL: does the table exist, does its contract table, and does the
// table have v1's status column.
const detectContractSQL = `SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL,
       EXISTS (SELECT FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'status' AND NOT attisdropped)`

func detectContract(ctx context.Context, q queryer, t pgident.Table) (Contract, error) {
	var table, marker, status bool
	if err := q.QueryRowContext(ctx, detectContractSQL, t.Qualified(), t.WithSuffix(ContractSuffix).Qualified()).
		Scan(&table, &marker, &status); err != nil {
		return Contract{}, fmt.Errorf("detect the contract of %s: %w", t, err)
	}
	switch {
	case marker:
		var c Contract
		err := q.QueryRowContext(ctx, `SELECT version, shards FROM `+t.WithSuffix(ContractSuffix).Qualified()).Scan(&c.Version, &c.Shards)
		if errors.Is(err, sql.ErrNoRows) {
			return Contract{}, fmt.Errorf("outbox table %s: its contract table %s has no row (run `relayworker migrate`)", t, t.WithSuffix(ContractSuffix))
		}
		if err != nil {
			return Contract{}, fmt.Errorf("read the contract of %s: %w", t, err)
		}
		return c, nil
	case !table:
		return Contract{Version: ContractNone}, nil
	case status:
		return Contract{Version: ContractV1}, nil
	default:
		return Contract{}, fmt.Errorf("outbox table %s follows no known contract: no %s row and no status column", t, t.WithSuffix(ContractSuffix))
	}
}

// MigrateV2 creates (or completes) a v2 outbox table, its side tables and its shard
// rows. It is idempotent and safe to run from several pods at once, under the same
// two advisory locks as Migrate (the schema's shared objects first, then the
// table's own under a lock keyed on the table: a v1 and a v2 migrate of one table
// serialise too). A v1 table is upgraded (upgrade.go: renamed aside in one short
// transaction, its rows with work copied to the hold table in chunks after it); an
// upgrade that was interrupted is resumed. It refuses a contract version it does not
// know. Without a shard count (opts.Shards 0) a v2 table keeps its own and a new one
// gets DefaultShards. A different shard count is applied only while the table and
// its hold table are empty (checked under a lock that keeps producers out); on a
// table with rows it is refused: it would move aggregates between shards.
func MigrateV2(ctx context.Context, db *sql.DB, t pgident.Table, opts V2Options) error {
	if opts.Shards != 0 {
		if err := ValidShards(opts.Shards); err != nil {
			return fmt.Errorf("migrate %s: %w", t, err)
		}
	}
	if err := errors.Join(ValidUpgradeChunk(opts.upgradeChunk()), ValidUpgradeLockTimeout(opts.upgradeLockTimeout())); err != nil {
		return fmt.Errorf("migrate %s: %w", t, err)
	}
	if err := MigrateShared(ctx, db, t.Schema, SharedStatements(t.Schema)); err != nil {
		return fmt.Errorf("migrate %s: %w", t, err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate %s: begin: %w", t, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "outbox-migrate:"+t.String()); err != nil {
		return fmt.Errorf("migrate %s: lock: %w", t, err)
	}
	c, err := detectContract(ctx, tx, t)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", t, err)
	}
	var stmts []string
	n := opts.shards(c.Shards)
	switch c.Version {
	case ContractNone:
		stmts = V2Statements(t, n, NewTableEventTypes)
	case ContractV1:
		// The upgrade's DDL includes V2Statements, with the types of EventTypes.upgraded.
		if err := startUpgrade(ctx, tx, t, n, opts.upgradeLockTimeout()); err != nil {
			return fmt.Errorf("migrate %s: %w", t, err)
		}
	case ContractV2:
		e, err := tableEventTypes(ctx, tx, t)
		if err != nil {
			return fmt.Errorf("migrate %s: %w", t, err)
		}
		stmts = V2Statements(t, n, e)
		if err := lockForDDL(ctx, tx, t, opts.upgradeLockTimeout()); err != nil {
			return fmt.Errorf("migrate %s: %w", t, err)
		}
		if c.Shards != n {
			if err := reshardable(ctx, tx, t, c.Shards, n); err != nil {
				return fmt.Errorf("migrate %s: %w", t, err)
			}
			stmts = append(reshardStatements(t, n), stmts...)
		}
	default:
		return fmt.Errorf("migrate %s: %w", t, unknownVersion(c.Version))
	}
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migrate %s: %w (statement: %s)", t, err, firstLine(stmt))
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate %s: commit: %w", t, err)
	}
	return resumeUpgrade(ctx, db, t, opts)
}

// resumeUpgrade copies what an upgrade from v1 (begun now or by an earlier migrate
// that was stopped) has not copied yet, and marks it done; a table that was never v1
// has no upgrade to finish.
func resumeUpgrade(ctx context.Context, db *sql.DB, t pgident.Table, opts V2Options) error {
	u, err := upgradeState(ctx, db, t)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", t, err)
	}
	if !u.InProgress() {
		return nil
	}
	c, err := DetectContract(ctx, db, t)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", t, err)
	}
	return finishUpgrade(ctx, db, t, c.Shards, opts.upgradeChunk())
}

// lockForDDL takes t's SHARE ROW EXCLUSIVE lock, waiting at most lock, before
// V2Statements run on an existing v2 table (every relay pod's migrate init container
// runs them, producers writing meanwhile). They take t's sequence (ALTER SEQUENCE ...
// OWNED BY) before t itself (CREATE INDEX IF NOT EXISTS takes a SHARE lock even when
// the index exists), while a producer's INSERT holds t (ROW EXCLUSIVE) before it draws
// from the sequence: the two deadlocked, and PostgreSQL broke the cycle after
// deadlock_timeout by aborting one of them, the migrate or the producer's own
// transaction. Taking t first, in the producers' order, makes the migrate wait for the
// INSERTs under way instead, and new ones wait for its few milliseconds of no-op DDL.
func lockForDDL(ctx context.Context, tx *sql.Tx, t pgident.Table, lock time.Duration) error {
	if _, err := tx.ExecContext(ctx, `SET LOCAL lock_timeout = '`+strconv.FormatInt(lock.Milliseconds(), 10)+`ms'`); err != nil {
		return fmt.Errorf("set the lock timeout: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `LOCK TABLE `+t.Qualified()+` IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		if pgerr.Is(err, pgerr.LockNotAvailable) {
			return fmt.Errorf("no SHARE ROW EXCLUSIVE lock on the table within %s (a transaction holds it: find it in pg_stat_activity, then run migrate again): %w", lock, err)
		}
		return fmt.Errorf("lock the table: %w", err)
	}
	return nil
}

// reshardable locks t against inserts (SHARE ROW EXCLUSIVE conflicts with the
// producers' ROW EXCLUSIVE) for the rest of the migrate and says whether its shard
// count may change from have to want: only while no event and no hold row exists.
func reshardable(ctx context.Context, tx *sql.Tx, t pgident.Table, have, want int) error {
	if _, err := tx.ExecContext(ctx, `LOCK TABLE `+t.Qualified()+` IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return fmt.Errorf("lock the table to change its shard count: %w", err)
	}
	var rows bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT FROM `+t.Qualified()+`) OR EXISTS (SELECT FROM `+
		t.WithSuffix(HoldSuffix).Qualified()+`)`).Scan(&rows); err != nil {
		return fmt.Errorf("check the table is empty: %w", err)
	}
	if rows {
		return shardChangeRefused(t, have, want)
	}
	return nil
}

// shardChangeRefused is the one line for a shard count change on a table with rows.
func shardChangeRefused(t pgident.Table, have, want int) error {
	return fmt.Errorf("outbox table %s has %d shards and holds events; %d shards would move aggregates between shards (refused: keep --shards %d, or start a new table)",
		t, have, want, have)
}

func unknownVersion(v int) error {
	return fmt.Errorf("table contract version %d is unknown to this build (it knows %d and %d): run a relayworker as new as the one that migrated it",
		v, ContractV1, ContractV2)
}
