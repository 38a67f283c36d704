// v2.go: the DDL of table contract v2 (docs/contract-v2.md): an insert-only outbox
// table whose rows carry the producer's transaction id, an insert sequence number and
// a shard derived by the database, plus the side tables the shard readers keep their
// whole state in (ticks, shard cursors and leases, the batch log, the hold table) and
// the contract row that says which contract a table follows.

package schema

import (
	"fmt"
	"strconv"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// Contract versions. A table follows exactly one; DetectContract tells them apart
// (the relay picks its loop from it).
const (
	ContractNone = 0 // no outbox table
	ContractV1   = 1 // status/lease columns on the row: the claim -> mark loop
	ContractV2   = 2 // insert-only table, shard cursors: the read -> advance loop
)

// Shard counts of a v2 table. The shard is hashtextextended(...) & (shards-1), so the
// count is a power of two; it is at most 32768 so every shard fits the smallint
// column. It is fixed per table: changing it moves aggregates between shards, so a
// change is refused once the table has rows. The default is what a new table gets
// when nobody asks for a count: every read visits each shard its worker holds (about
// 9 µs of PostgreSQL time per shard), and 32 shards kept every latency target where
// 256 missed two (docs/contract-v2.md, "fewer shards"), while still letting 32
// workers share a table.
const (
	DefaultShards = 32
	MaxShards     = 32768
)

// Suffixes of the v2 side objects (besides WorkersSuffix, which v2 shares with v1).
// They leave the room pgident reserves for suffixes, so no name gets truncated.
const (
	SeqSuffix      = "_seq"      // the insert sequence (CACHE 1)
	TickSuffix     = "_tick"     // one row per tick: a snapshot and the sequence around it
	ShardSuffix    = "_shard"    // a view, one row per shard: owner, lease_until, lo_tick, hi_tick, pos
	LeaseSuffix    = "_lease"    // one row per shard: the token that holds it
	TokenSuffix    = "_token"    // one row per lease token: until when its leases last
	CursorSuffix   = "_cursor"   // the cursor log: one row per cursor move, insert-only
	BatchSuffix    = "_batch"    // one row per published batch: the batch log
	HoldSuffix     = "_hold"     // failed events and the newer versions held behind them
	ContractSuffix = "_contract" // one row: contract version and shard count
)

// StatusHeld is the hold state of an event kept back because an older version of its
// aggregate is waiting to be retried (StatusRetry); StatusDead rows never hold
// anything back.
const StatusHeld = "HELD"

// V2Options are the choices a v2 table is created with.
type V2Options struct {
	// Shards is the fixed shard count, a power of two from 1 to MaxShards; 0 keeps an
	// existing v2 table's count and gives a new table (or one upgraded from v1)
	// DefaultShards.
	Shards int
	// UpgradeChunk is how many v1 rows one copy statement of an upgrade from v1 scans
	// (0: DefaultUpgradeChunk; else 1..MaxUpgradeChunk).
	UpgradeChunk int
	// UpgradeLockTimeout bounds the wait of an upgrade from v1 for the table's ACCESS
	// EXCLUSIVE lock (0: DefaultUpgradeLockTimeout; else ValidUpgradeLockTimeout).
	UpgradeLockTimeout time.Duration
}

func (o V2Options) upgradeChunk() int {
	if o.UpgradeChunk <= 0 {
		return DefaultUpgradeChunk
	}
	return o.UpgradeChunk
}

func (o V2Options) upgradeLockTimeout() time.Duration {
	if o.UpgradeLockTimeout == 0 {
		return DefaultUpgradeLockTimeout
	}
	return o.UpgradeLockTimeout
}

// shards returns the shard count for a table that has `have` shards now (0: not a v2
// table yet).
func (o V2Options) shards(have int) int {
	switch {
	case o.Shards != 0:
		return o.Shards
	case have != 0:
		return have
	}
	return DefaultShards
}

// ValidShards says whether n can be a v2 table's shard count.
func ValidShards(n int) error {
	if n < 1 || n > MaxShards || n&(n-1) != 0 {
		return fmt.Errorf("shard count %d is not a power of two from 1 to %d", n, MaxShards)
	}
	return nil
}

// ShardExpr is the generated shard column's expression for a table of n shards:
// what hash partitioning uses (stable across PostgreSQL versions) over the aggregate
// key, masked to the shard count.
func ShardExpr(n int) string {
	return `(hashtextextended(aggregate_type || '/' || aggregate_id, 0) & ` + strconv.Itoa(n-1) + `)::smallint`
}

// SeqDefault is the seq column's default. The CASE makes the transaction take its id
// before it draws the number, whatever order PostgreSQL evaluates the defaults in: the
// window read's lower bound (a tick's seq_before) relies on "id first, number second".
func SeqDefault(t pgident.Table) string {
	return `CASE WHEN pg_current_xact_id() IS NOT NULL THEN nextval(` + pgident.QuoteLiteral(t.WithSuffix(SeqSuffix).Qualified()) + `) END`
}

// TxidDefault is the txid column's default: the producer's top-level transaction id
// (a subtransaction's rows carry it too).
const TxidDefault = `pg_current_xact_id()`

// TickSnapshot is the snapshot a tick records: the statement's own snapshot, with
// xmax raised to the recording transaction's id and every id in [old xmax, that id)
// added to the running list (xip). PostgreSQL's xmax is the newest completed id + 1,
// so a transaction that took an id at or above it and is still running is invisible
// in the snapshot but not listed in xip. A producer like that can have drawn its seq
// before the tick read seq_before, and commits after the tick: the window read finds
// rows with seq <= lo.seq_before only through lo's xip, so without these ids such a
// row would be in no window at all (lost, and never counted pending). Every id in
// the added range is invisible in the snapshot anyway (it is >= the old xmax), so
// visibility is unchanged; the ids are merely named. Ids above the recorder's own
// were taken after it, hence after seq_before was read, and draw larger seqs (the
// read's range part finds them). GREATEST keeps a recorder whose id is older than
// the snapshot (migrate's first tick, in the transaction that made the table) valid.
const TickSnapshot = `(SELECT (pg_snapshot_xmin(c.s)::text || ':' || c.hi::text || ':' ||
         array_to_string(ARRAY(SELECT x::text::bigint FROM pg_snapshot_xip(c.s) x
                               UNION
                               SELECT generate_series(pg_snapshot_xmax(c.s)::text::bigint, c.hi::text::bigint - 1)
                               ORDER BY 1), ','))::pg_snapshot
 FROM (SELECT pg_current_snapshot() AS s,
              GREATEST(pg_snapshot_xmax(pg_current_snapshot()), pg_current_xact_id()) AS hi) c)`

// V2Statements is the DDL of a v2 table of n shards and its side tables, in the order
// MigrateV2 runs it; every statement is idempotent.
func V2Statements(t pgident.Table, n int, e EventTypes) []string {
	q := t.Qualified()
	seq := t.WithSuffix(SeqSuffix).Qualified()
	tick := t.WithSuffix(TickSuffix).Qualified()
	hold := t.WithSuffix(HoldSuffix).Qualified()
	batch := t.WithSuffix(BatchSuffix).Qualified()
	contract := t.WithSuffix(ContractSuffix).Qualified()
	stmts := append([]string{
		// CACHE 1: a per-session cache hands numbers out of insert order.
		`CREATE SEQUENCE IF NOT EXISTS ` + seq + ` AS bigint CACHE 1`,
		// The producers' columns of v1 (a plain INSERT of the first nine is a complete
		// event) and three the database fills. Nothing here is ever updated or deleted
		// by the relay.
		`CREATE TABLE IF NOT EXISTS ` + q + ` (
    event_id           text        PRIMARY KEY,
    aggregate_type     text        NOT NULL,
    aggregate_id       text        NOT NULL,
    aggregate_version  bigint      NOT NULL,
    event_type         text        NOT NULL,
    event_version      int         NOT NULL DEFAULT 1,
    destination        text        NOT NULL,
    message_key        text        NOT NULL,
    payload            ` + e.column(e.Payload) + `NOT NULL,
    headers            ` + e.column(e.Headers) + `NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    txid               xid8        NOT NULL DEFAULT ` + TxidDefault + `,
    seq                bigint      NOT NULL DEFAULT (` + SeqDefault(t) + `),
    shard              smallint    NOT NULL GENERATED ALWAYS AS (` + ShardExpr(n) + `) STORED
)`,
		// Dropping the table drops its sequence.
		`ALTER SEQUENCE ` + seq + ` OWNED BY ` + q + `.seq`,
		// One event per aggregate version (as v1).
		`CREATE UNIQUE INDEX IF NOT EXISTS ` + t.Ident("_version_key") + ` ON ` + q +
			` (aggregate_type, aggregate_id, aggregate_version)`,
		// The window read: one ordered range scan per shard.
		`CREATE INDEX IF NOT EXISTS ` + t.Ident("_seq_idx") + ` ON ` + q + ` (shard, seq)`,
		// The rows of transactions that straddled a tick, found by id.
		`CREATE INDEX IF NOT EXISTS ` + t.Ident("_txid_idx") + ` ON ` + q + ` (shard, txid)`,

		`CREATE TABLE IF NOT EXISTS ` + tick + ` (
    tick       bigint      PRIMARY KEY,
    snap       pg_snapshot NOT NULL,
    snap_xmax  xid8        NOT NULL,
    seq_before bigint      NOT NULL,
    seq_after  bigint      NOT NULL,
    at         timestamptz NOT NULL DEFAULT now()
)`,
		// owner is the worker id; shards/last_seq/hi_tick are per shard advanced,
		// partitions/offsets/seqs per event published, in the order they were published.
		`CREATE TABLE IF NOT EXISTS ` + batch + ` (
    batch      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner      text        NOT NULL,
    shards     smallint[]  NOT NULL,
    last_seq   bigint[]    NOT NULL,
    hi_tick    bigint[]    NOT NULL,
    partitions int[]       NOT NULL,
    offsets    bigint[]    NOT NULL,
    at         timestamptz NOT NULL DEFAULT now(),
    seqs       bigint[]    NULL
)`,
		// A batch log made before seqs existed gets the column (its old rows: NULL, not
		// traceable to an offset). VerifyV2 refuses a table without it. Only then:
		// ADD COLUMN IF NOT EXISTS takes an ACCESS EXCLUSIVE lock even when the column
		// is there, and the migrate runs at every relay pod's start.
		`DO $$BEGIN
    IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = ` + pgident.QuoteLiteral(batch) + `::regclass AND attname = 'seqs' AND NOT attisdropped) THEN
        ALTER TABLE ` + batch + ` ADD COLUMN seqs bigint[] NULL;
    END IF;
END$$`,
		// The trace finds an event's batch from the event's created_at on (a batch is
		// logged after the event committed): one entry per batch, not per event.
		`CREATE INDEX IF NOT EXISTS ` + t.Ident("_batch_at") + ` ON ` + batch + ` (at)`,
		// A copy of the event (it outlives the outbox row's retention), where it sat in
		// the table, and its failure state.
		`CREATE TABLE IF NOT EXISTS ` + hold + ` (
    event_id           text        PRIMARY KEY,
` + eventCopyColumns(e) + `    state              text        NOT NULL CHECK (state IN ('` + StatusRetry + `', '` + StatusDead + `', '` + StatusHeld + `')),
    attempts           int         NOT NULL DEFAULT 0,
    next_attempt_at    timestamptz NOT NULL DEFAULT now(),
    last_error_code    text        NULL,
    last_error_message text        NULL,
    held_at            timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
)`,
		// "The due RETRY and HELD rows of these shards."
		`CREATE INDEX IF NOT EXISTS ` + t.Ident("_hold_due") + ` ON ` + hold +
			` (shard, next_attempt_at) WHERE ` + OpenHold,
		// "Does this aggregate have an open hold row (below this version)?"
		`CREATE INDEX IF NOT EXISTS ` + t.Ident("_hold_open") + ` ON ` + hold +
			` (aggregate_type, aggregate_id, aggregate_version) WHERE ` + OpenHold,

		// `relayworker replay`'s audit (the same table as v1's: the DeadLetterReplay
		// controller reads its status from it whatever the contract).
		ReplayAuditDDL(t),

		// The live workers a fair share is computed from (shared with v1's status report).
		WorkersDDL(t),

		// The contract marker: one row (the key can only be true).
		`CREATE TABLE IF NOT EXISTS ` + contract + ` (
    one         boolean     PRIMARY KEY DEFAULT true CHECK (one),
    version     int         NOT NULL,
    shards      int         NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    migrated_at timestamptz NOT NULL DEFAULT now()
)`,
		`INSERT INTO ` + contract + ` (version, shards) VALUES (` + strconv.Itoa(ContractV2) + `, ` + strconv.Itoa(n) + `)
ON CONFLICT (one) DO UPDATE SET migrated_at = now()`,
		// The first tick: every shard's first window starts here. The table is new in
		// (or older than) this transaction, so no row can be visible before it.
		`INSERT INTO ` + tick + ` (tick, snap, snap_xmax, seq_before, seq_after)
SELECT 1, ts.snap, pg_snapshot_xmax(ts.snap),
       COALESCE(pg_sequence_last_value(` + pgident.QuoteLiteral(seq) + `), 0), COALESCE(pg_sequence_last_value(` + pgident.QuoteLiteral(seq) + `), 0)
FROM (SELECT ` + TickSnapshot + ` AS snap) ts
WHERE NOT EXISTS (SELECT FROM ` + tick + `)`,
		// The shards' leases and cursors (v2_shard.go), from the first tick on.
	}, shardStateStatements(t, n)...)
	stmts = append(stmts,
		// Operators' per-event status in SQL (v2_view.go).
		StatusViewDDL(t))
	return append(stmts, v2ArchiveStatements(t, e)...)
}

// reshardStatements change an empty v2 table's shard count to n: the generated column
// is rebuilt (dropping it drops the two shard indexes, which V2Statements recreate)
// and the contract row says n (V2Statements deletes the leases and cursors of shards
// above it). MigrateV2 runs them before V2Statements, and only after it checked,
// holding a lock that keeps producers out, that the table and its hold table are
// empty.
func reshardStatements(t pgident.Table, n int) []string {
	q := t.Qualified()
	return []string{
		// The status view reads the column; V2Statements creates it again.
		`DROP VIEW IF EXISTS ` + t.WithSuffix(StatusViewSuffix).Qualified(),
		`ALTER TABLE ` + q + ` DROP COLUMN shard`,
		`ALTER TABLE ` + q + ` ADD COLUMN shard smallint NOT NULL GENERATED ALWAYS AS (` + ShardExpr(n) + `) STORED`,
		`UPDATE ` + t.WithSuffix(ContractSuffix).Qualified() + ` SET shards = ` + strconv.Itoa(n),
	}
}

// OpenHold is the condition of an open hold row (RETRY or HELD: the event, or a
// version held behind one, still to be sent), the predicate of the hold table's
// partial indexes: a statement that repeats it word for word can use them.
const OpenHold = `state IN ('` + StatusRetry + `', '` + StatusHeld + `')`
