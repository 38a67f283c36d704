// upgrade.go: upgrading a v1 outbox table to contract v2 in place
// (docs/contract-v2.md, "As built: upgrading a v1 table"). One short transaction
// renames the v1 table aside and creates the v2 table under its name (producers write
// into v2 from their next statement); then the v1 rows that still have work are copied
// into the v2 hold table in bounded chunks, and the upgrade is marked done. v2 relays
// publish nothing until then (UpgradeState), because until the copy ends an
// aggregate's older versions may not be in the hold table yet.

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

// Names and limits of the upgrade.
const (
	// AsideSuffix names the v1 table once renamed aside: it keeps the SENT history
	// (and every row, as it was) for trace, archive and a manual roll back.
	AsideSuffix = "_v1"
	// UpgradeSuffix names the upgrade's progress table: one row.
	UpgradeSuffix = "_upgrade"
	// DefaultUpgradeChunk is how many v1 rows one copy statement scans.
	DefaultUpgradeChunk = 5000
	// MaxUpgradeChunk bounds V2Options.UpgradeChunk: one statement, one transaction,
	// holding the migrate lock (a chunk of 5,000 took up to 381 ms on a loaded machine).
	MaxUpgradeChunk = 1_000_000
	// DefaultUpgradeLockTimeout bounds the wait for the rename's ACCESS EXCLUSIVE lock:
	// a long transaction on the v1 table would otherwise queue every producer behind
	// it (producers wait behind the migrate's lock request for as long as it waits).
	DefaultUpgradeLockTimeout = 5 * time.Second
	// MaxUpgradeLockTimeout bounds V2Options.UpgradeLockTimeout: producers stall for as
	// long as the lock request waits.
	MaxUpgradeLockTimeout = 10 * time.Minute
)

// ValidUpgradeChunk is nil when n rows per copy statement is in 1..MaxUpgradeChunk.
func ValidUpgradeChunk(n int) error {
	if n < 1 || n > MaxUpgradeChunk {
		return fmt.Errorf("upgrade chunk of %d rows: must be from 1 to %d", n, MaxUpgradeChunk)
	}
	return nil
}

// ValidUpgradeLockTimeout is nil when d is a lock_timeout PostgreSQL applies as given:
// whole milliseconds (less is rendered as 0, which means no timeout at all), at most
// MaxUpgradeLockTimeout.
func ValidUpgradeLockTimeout(d time.Duration) error {
	if d < time.Millisecond || d > MaxUpgradeLockTimeout || d%time.Millisecond != 0 {
		return fmt.Errorf("upgrade lock timeout %s: must be whole milliseconds from 1ms to %s", d, MaxUpgradeLockTimeout)
	}
	return nil
}

// Upgrade states in <table>_upgrade.
const (
	UpgradeCopying = "copying"
	UpgradeDone    = "done"
)

// Upgrade is the progress of a v1 -> v2 upgrade (the zero value: none ever ran).
type Upgrade struct {
	State  string // "", UpgradeCopying or UpgradeDone
	From   string // the v1 table, renamed aside
	Copied int64  // v1 rows written to the hold table (DEAD ones included)
	Dead   int64  // of those, DEAD
}

// InProgress says whether v2 relays must wait: the copy has not finished.
func (u Upgrade) InProgress() bool { return u.State == UpgradeCopying }

// upgradeStateSQL: $1 the upgrade table. No table: no upgrade ever ran.
const upgradeStateSQL = `SELECT to_regclass($1) IS NOT NULL`

// UpgradeState reads t's upgrade progress.
func UpgradeState(ctx context.Context, db *sql.DB, t pgident.Table) (Upgrade, error) {
	return upgradeState(ctx, db, t)
}

func upgradeState(ctx context.Context, q queryer, t pgident.Table) (Upgrade, error) {
	ut := t.WithSuffix(UpgradeSuffix)
	var exists bool
	if err := q.QueryRowContext(ctx, upgradeStateSQL, ut.Qualified()).Scan(&exists); err != nil {
		return Upgrade{}, fmt.Errorf("read the upgrade state of %s: %w", t, err)
	}
	if !exists {
		return Upgrade{}, nil
	}
	var u Upgrade
	err := q.QueryRowContext(ctx, `SELECT state, from_table, copied, dead FROM `+ut.Qualified()).Scan(&u.State, &u.From, &u.Copied, &u.Dead)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Upgrade{}, fmt.Errorf("read the upgrade state of %s: %w", t, err)
	}
	return u, nil
}

// upgradeStartStatements rename the v1 table t aside and create the v2 table of n
// shards under its name, with the progress row saying the copy is under way. They run
// in MigrateV2's transaction, after its lock and the contract check; lock bounds the
// wait for the table's lock; notify re-creates v1's NOTIFY trigger on the new table;
// e are the v2 table's payload and headers types (EventTypes.upgraded).
func upgradeStartStatements(t pgident.Table, n int, lock time.Duration, notify bool, e EventTypes) []string {
	aside := t.WithSuffix(AsideSuffix)
	ut := t.WithSuffix(UpgradeSuffix).Qualified()
	stmts := []string{
		`SET LOCAL lock_timeout = '` + strconv.FormatInt(lock.Milliseconds(), 10) + `ms'`,
		`LOCK TABLE ` + t.Qualified() + ` IN ACCESS EXCLUSIVE MODE`,
		`ALTER TABLE ` + t.Qualified() + ` RENAME TO ` + pgident.Quote(aside.Name),
		// The primary key's index is <table>_pkey, the name v2's primary key takes. v1's
		// other index names differ from v2's.
		`ALTER INDEX IF EXISTS ` + pgident.Quote(t.Schema) + `.` + t.Ident("_pkey") + ` RENAME TO ` + aside.Ident("_pkey"),
		// v1's archive (a RetentionPolicy's, rows shaped like v1's) goes aside with the
		// table, index included (its name is the one v2's archive index takes), so v2
		// retention finds an archive of its own shape under <table>_archive.
		`ALTER TABLE IF EXISTS ` + t.WithSuffix(ArchiveSuffix).Qualified() + ` RENAME TO ` + pgident.Quote(aside.WithSuffix(ArchiveSuffix).Name),
		`ALTER INDEX IF EXISTS ` + pgident.Quote(t.Schema) + `.` + t.Ident(ArchiveSuffix+"_event_idx") + ` RENAME TO ` + aside.Ident(ArchiveSuffix+"_event_idx"),
	}
	stmts = append(stmts, V2Statements(t, n, e)...)
	stmts = append(stmts,
		`CREATE TABLE IF NOT EXISTS `+ut+` (
    one         boolean     PRIMARY KEY DEFAULT true CHECK (one),
    from_table  text        NOT NULL,
    state       text        NOT NULL CHECK (state IN ('`+UpgradeCopying+`', '`+UpgradeDone+`')),
    last_event_id text      NOT NULL DEFAULT '',
    copied      bigint      NOT NULL DEFAULT 0,
    dead        bigint      NOT NULL DEFAULT 0,
    started_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz NULL
)`,
		// A progress row left by an earlier upgrade (rolled back by hand) starts over.
		`INSERT INTO `+ut+` (from_table, state) VALUES (`+pgident.QuoteLiteral(aside.String())+`, '`+UpgradeCopying+`')
ON CONFLICT (one) DO UPDATE SET from_table = EXCLUDED.from_table, state = EXCLUDED.state, last_event_id = '', copied = 0, dead = 0,
    started_at = now(), updated_at = now(), finished_at = NULL`)
	if notify {
		stmts = append(stmts, NotifyTriggerStatements(t)...)
	}
	return stmts
}

// hasNotifyTriggerSQL: $1 the table, $2 the trigger's name.
const hasNotifyTriggerSQL = `SELECT EXISTS (SELECT FROM pg_trigger WHERE tgrelid = to_regclass($1) AND tgname = $2)`

// startUpgrade runs upgradeStartStatements in tx (MigrateV2's, holding the table's
// migrate lock, t found to be v1).
func startUpgrade(ctx context.Context, tx *sql.Tx, t pgident.Table, n int, lock time.Duration) error {
	if err := ValidShards(n); err != nil {
		return err
	}
	if err := ValidUpgradeLockTimeout(lock); err != nil {
		return err
	}
	var notify bool
	if err := tx.QueryRowContext(ctx, hasNotifyTriggerSQL, t.Qualified(), t.Name+"_notify_trg").Scan(&notify); err != nil {
		return fmt.Errorf("look for the notify trigger: %w", err)
	}
	e, err := tableEventTypes(ctx, tx, t)
	if err != nil {
		return fmt.Errorf("upgrade to contract v2: %w", err)
	}
	for _, stmt := range upgradeStartStatements(t, n, lock, notify, e.upgraded()) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			if pgerr.Is(err, pgerr.LockNotAvailable) {
				return fmt.Errorf("upgrade to contract v2: no ACCESS EXCLUSIVE lock on the table within %s (a transaction holds it: find it in pg_stat_activity, then run migrate again): %w",
					lock, err)
			}
			return fmt.Errorf("upgrade to contract v2: %w (statement: %s)", err, firstLine(stmt))
		}
	}
	return nil
}

// copyChunkSQL copies the next chunk of the aside table into the hold table and moves
// the progress row's cursor, in one statement: $1 how many v1 rows to scan. The chunk
// is the next $1 rows by event_id after the cursor (a primary key range scan: the
// cursor is a scalar subquery, a join would sort the whole table; SENT rows
// included, so a statement's work is bounded whatever the mix); of those:
//   - DEAD stays DEAD (attempts and last error kept: replayable);
//   - the lowest version of an aggregate with work (PENDING, SENDING, RETRY) becomes
//     its RETRY row: PENDING due now, RETRY at its next_retry_at, SENDING at its
//     lease_until (a v1 worker that claimed it may still publish it until then; after
//     it, v2 publishes it again: a duplicate, never a reorder);
//   - higher versions with work become HELD behind it, as the v2 relay's own holds do
//     (at most one RETRY per aggregate, the lowest).
//
// ON CONFLICT (event_id) DO NOTHING: a chunk run twice (a migrate killed after its
// commit was sent) copies nothing twice. seq 0 and txid 0: the row has no place in a
// v2 window; only the relay's hold reads, which order by aggregate version, see it.
func copyChunkSQL(t pgident.Table, n int) string {
	aside := t.WithSuffix(AsideSuffix).Qualified()
	ut := t.WithSuffix(UpgradeSuffix).Qualified()
	return `WITH scan AS (
    SELECT v.* FROM ` + aside + ` v WHERE v.event_id > (SELECT last_event_id FROM ` + ut + `) ORDER BY v.event_id LIMIT $1
),
ins AS (
    INSERT INTO ` + t.WithSuffix(HoldSuffix).Qualified() + ` (event_id, aggregate_type, aggregate_id, aggregate_version,
        event_type, event_version, destination, message_key, payload, headers, created_at, txid, seq, shard,
        state, attempts, next_attempt_at, last_error_code, last_error_message)
    SELECT c.event_id, c.aggregate_type, c.aggregate_id, c.aggregate_version,
           c.event_type, c.event_version, c.destination, c.message_key, c.payload, c.headers, c.created_at,
           '0'::xid8, 0, ` + shardOf("c", n) + `,
           CASE WHEN c.status = '` + StatusDead + `' THEN '` + StatusDead + `'
                WHEN EXISTS (SELECT FROM ` + aside + ` p
                             WHERE p.aggregate_type = c.aggregate_type AND p.aggregate_id = c.aggregate_id
                               AND p.aggregate_version < c.aggregate_version AND p.status IN ` + NonTerminalIn + `)
                THEN '` + StatusHeld + `'
                ELSE '` + StatusRetry + `' END,
           c.retry_count,
           CASE c.status WHEN '` + StatusRetry + `' THEN c.next_retry_at
                         WHEN '` + StatusSending + `' THEN GREATEST(COALESCE(c.lease_until, now()), now())
                         ELSE now() END,
           c.last_error_code, c.last_error_message
    FROM scan c
    WHERE c.status IN ('` + StatusPending + `', '` + StatusSending + `', '` + StatusRetry + `', '` + StatusDead + `')
    ON CONFLICT (event_id) DO NOTHING
    RETURNING state
),
prog AS (
    UPDATE ` + ut + `
    SET last_event_id = COALESCE((SELECT max(event_id) FROM scan), last_event_id),
        copied = copied + (SELECT count(*) FROM ins),
        dead = dead + (SELECT count(*) FROM ins WHERE state = '` + StatusDead + `'),
        updated_at = now()
    RETURNING 1
)
SELECT (SELECT count(*) FROM scan), (SELECT count(*) FROM prog)`
}

// shardOf is ShardExpr over the columns of alias.
func shardOf(alias string, n int) string {
	return `(hashtextextended(` + alias + `.aggregate_type || '/' || ` + alias + `.aggregate_id, 0) & ` + strconv.Itoa(n-1) + `)::smallint`
}

// finishUpgradeSQL marks the copy done (v2 relays start publishing).
func finishUpgradeSQL(t pgident.Table) string {
	return `UPDATE ` + t.WithSuffix(UpgradeSuffix).Qualified() + ` SET state = '` + UpgradeDone + `', finished_at = now(), updated_at = now()
WHERE state = '` + UpgradeCopying + `'`
}

// copyChunk copies one chunk in a transaction of its own holding the table's migrate
// lock (two migrates take turns per chunk); it returns how many v1 rows it scanned
// (0: the copy is complete).
func copyChunk(ctx context.Context, db *sql.DB, t pgident.Table, n, chunk int) (int, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "outbox-migrate:"+t.String()); err != nil {
		return 0, fmt.Errorf("lock: %w", err)
	}
	var scanned, progress int
	if err := tx.QueryRowContext(ctx, copyChunkSQL(t, n), chunk).Scan(&scanned, &progress); err != nil {
		return 0, fmt.Errorf("copy v1 rows to the hold table: %w", err)
	}
	if progress != 1 {
		return 0, fmt.Errorf("copy v1 rows to the hold table: the progress row of %s is missing", t.WithSuffix(UpgradeSuffix))
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit a copied chunk: %w", err)
	}
	return scanned, nil
}

// finishUpgrade copies every remaining chunk, then marks the upgrade done.
func finishUpgrade(ctx context.Context, db *sql.DB, t pgident.Table, n, chunk int) error {
	for {
		scanned, err := copyChunk(ctx, db, t, n, chunk)
		if err != nil {
			return fmt.Errorf("upgrade %s to contract v2: %w", t, err)
		}
		if scanned == 0 {
			break
		}
	}
	if _, err := db.ExecContext(ctx, finishUpgradeSQL(t)); err != nil {
		return fmt.Errorf("upgrade %s to contract v2: mark it done: %w", t, err)
	}
	return nil
}
