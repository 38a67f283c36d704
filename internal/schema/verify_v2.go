// verify_v2.go: the start-up check of a v2 table. The relay reads it before its first
// window: every rule it checks is one the window read's correctness rests on, so a
// table that breaks one is refused with one line instead of losing or stalling events.

package schema

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// v2Facts is what VerifyV2 reads from the catalog and the table; checkV2 decides.
type v2Facts struct {
	Contract Contract
	// Deparsed expressions (pg_get_expr) of the txid and seq defaults and the shard
	// generation; "" when the column has none.
	Txid, Seq, Shard string
	// ShardGenerated: shard is a STORED generated column.
	ShardGenerated bool
	// SeqName is the sequence as regclass prints it under the session's search_path
	// (how pg_get_expr prints it inside nextval); "" when it does not exist.
	SeqName  string
	SeqCache int64
	// HasRows: the outbox table has at least one event.
	HasRows bool
	// BatchSeqs: the batch log has its seqs column (added after the first v2 tables).
	BatchSeqs bool
	// CursorLog: the shards' state is the lease, token and cursor tables and the shard
	// view (v2_shard.go), not the shard table updated in place of earlier builds.
	CursorLog bool
	// FutureTxid is the largest txid of a row at or above the server's next
	// transaction id, FutureTick the largest tick snapshot's xmax above it; "" when
	// none. Xmax is that next id.
	FutureTxid, FutureTick, Xmax string
}

// VerifyV2 checks that t is a v2 table this build can relay with shards shards (0:
// whatever the table has) and returns one actionable line otherwise: no table, a v1
// table, an unknown contract version, another shard count (on a table with rows:
// refused for good), defaults that are not the contract's (txid, the seq CASE, the
// sequence's CACHE 1, the shard expression), or a logically restored database whose
// rows carry transaction ids from the future. It returns the table's contract.
func VerifyV2(ctx context.Context, db *sql.DB, t pgident.Table, shards int) (Contract, error) {
	c, err := DetectContract(ctx, db, t)
	if err != nil {
		return Contract{}, err
	}
	f := v2Facts{Contract: c}
	if c.Version == ContractV2 {
		if err := readV2Facts(ctx, db, t, &f); err != nil {
			return c, err
		}
	}
	return c, checkV2(t, f, shards)
}

// v2FactsSQL reads the column defaults, the sequence, whether the table has rows and
// whether the batch log has seqs and the shards' state is a cursor log. $1 the table,
// $2 its sequence, $3 its batch log.
func v2FactsSQL(t pgident.Table) string {
	expr := func(col string) string {
		return `(SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d
         JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
         WHERE d.adrelid = to_regclass($1) AND a.attname = '` + col + `' AND NOT a.attisdropped)`
	}
	return `SELECT COALESCE(` + expr("txid") + `, ''),
       COALESCE(` + expr("seq") + `, ''),
       COALESCE(` + expr("shard") + `, ''),
       EXISTS (SELECT FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'shard' AND attgenerated = 's' AND NOT attisdropped),
       COALESCE(to_regclass($2)::text, ''),
       COALESCE((SELECT seqcache FROM pg_sequence WHERE seqrelid = to_regclass($2)), 0),
       EXISTS (SELECT FROM ` + t.Qualified() + `),
       EXISTS (SELECT FROM pg_attribute WHERE attrelid = to_regclass($3) AND attname = 'seqs' AND NOT attisdropped),
       EXISTS (SELECT FROM pg_class WHERE oid = to_regclass(` + pgident.QuoteLiteral(t.WithSuffix(ShardSuffix).Qualified()) + `) AND relkind = 'v')
         AND to_regclass(` + pgident.QuoteLiteral(t.WithSuffix(CursorSuffix).Qualified()) + `) IS NOT NULL
         AND to_regclass(` + pgident.QuoteLiteral(t.WithSuffix(LeaseSuffix).Qualified()) + `) IS NOT NULL
         AND to_regclass(` + pgident.QuoteLiteral(t.WithSuffix(TokenSuffix).Qualified()) + `) IS NOT NULL`
}

// futureSQL finds txids from the future: the newest txid of each shard (one probe of
// the (shard, txid) index each, not a scan of the table) and the newest tick, against
// the next transaction id the server will hand out. pg_snapshot_xmax, not
// pg_current_xact_id(): the check must not take a transaction id itself.
func futureSQL(t pgident.Table, shards int) string {
	return `WITH cur AS (SELECT pg_snapshot_xmax(pg_current_snapshot()) AS xmax)
SELECT COALESCE((SELECT top::text FROM (
           SELECT (SELECT o.txid FROM ` + t.Qualified() + ` o WHERE o.shard = g::smallint ORDER BY o.txid DESC LIMIT 1) AS top
           FROM generate_series(0, ` + fmt.Sprint(shards-1) + `) g) s, cur
       WHERE s.top >= cur.xmax ORDER BY s.top DESC LIMIT 1), ''),
       COALESCE((SELECT k.snap_xmax::text FROM ` + t.WithSuffix(TickSuffix).Qualified() + ` k, cur
       WHERE k.snap_xmax > cur.xmax ORDER BY k.snap_xmax DESC LIMIT 1), ''),
       (SELECT xmax::text FROM cur)`
}

func readV2Facts(ctx context.Context, db *sql.DB, t pgident.Table, f *v2Facts) error {
	if err := db.QueryRowContext(ctx, v2FactsSQL(t), t.Qualified(), t.WithSuffix(SeqSuffix).Qualified(), t.WithSuffix(BatchSuffix).Qualified()).
		Scan(&f.Txid, &f.Seq, &f.Shard, &f.ShardGenerated, &f.SeqName, &f.SeqCache, &f.HasRows, &f.BatchSeqs, &f.CursorLog); err != nil {
		return fmt.Errorf("check table %s: %w", t, err)
	}
	if f.Contract.Shards < 1 || ValidShards(f.Contract.Shards) != nil {
		return nil // checkV2 refuses the count; the probe needs a sane one
	}
	if err := db.QueryRowContext(ctx, futureSQL(t, f.Contract.Shards)).Scan(&f.FutureTxid, &f.FutureTick, &f.Xmax); err != nil {
		return fmt.Errorf("check table %s for transaction ids from the future: %w", t, err)
	}
	return nil
}

// checkV2 decides VerifyV2's answer from the facts: nil, or the first rule broken.
func checkV2(t pgident.Table, f v2Facts, shards int) error {
	c := f.Contract
	switch {
	case c.Version == ContractNone:
		return fmt.Errorf("outbox table %s does not exist (run `relayworker migrate`)", t)
	case c.Version == ContractV1:
		return fmt.Errorf("outbox table %s follows contract v1, not v2", t)
	case c.Version != ContractV2:
		return fmt.Errorf("outbox table %s: %w", t, unknownVersion(c.Version))
	case ValidShards(c.Shards) != nil:
		return fmt.Errorf("outbox table %s: its contract row says %d shards: %v", t, c.Shards, ValidShards(c.Shards))
	case shards != 0 && shards != c.Shards && f.HasRows:
		return shardChangeRefused(t, c.Shards, shards)
	case shards != 0 && shards != c.Shards:
		return fmt.Errorf("outbox table %s has %d shards, not %d (it is empty: `relayworker migrate --shards %d` changes it)", t, c.Shards, shards, shards)
	case !sameExpr(f.Txid, TxidDefault):
		return defaultRefused(t, "txid", f.Txid, TxidDefault)
	case f.SeqName == "":
		return fmt.Errorf("outbox table %s: its sequence %s is missing (run `relayworker migrate`)", t, t.WithSuffix(SeqSuffix))
	case !sameExpr(f.Seq, seqDefaultAs(f.SeqName)):
		return defaultRefused(t, "seq", f.Seq, seqDefaultAs(f.SeqName))
	case f.SeqCache != 1:
		return fmt.Errorf("outbox table %s: sequence %s has CACHE %d; the contract needs CACHE 1 (a cache hands numbers out of insert order): ALTER SEQUENCE %s CACHE 1",
			t, t.WithSuffix(SeqSuffix), f.SeqCache, t.WithSuffix(SeqSuffix).Qualified())
	case !f.ShardGenerated || !sameExpr(f.Shard, ShardExpr(c.Shards)):
		return fmt.Errorf("outbox table %s: column shard is not the contract's generated column %s STORED (it is %q)", t, ShardExpr(c.Shards), f.Shard)
	case !f.BatchSeqs:
		return fmt.Errorf("outbox table %s: its batch log %s has no seqs column (made by an earlier migrate; run `relayworker migrate`, which adds it)", t, t.WithSuffix(BatchSuffix))
	case !f.CursorLog:
		return fmt.Errorf("outbox table %s: its shard state is the shard table of an earlier build, not the cursor log this build writes (run `relayworker migrate`, which converts it)", t)
	case f.FutureTxid != "":
		return fmt.Errorf("outbox table %s has txids from the future (%s, the server's next transaction id is %s): a logically restored database cannot be relayed by transaction id; start a new table and copy the events into it",
			t, f.FutureTxid, f.Xmax)
	case f.FutureTick != "":
		return fmt.Errorf("outbox table %s has ticks from the future (snapshot xmax %s, the server's next transaction id is %s): a logically restored database; empty %s and run `relayworker migrate`",
			t, f.FutureTick, f.Xmax, t.WithSuffix(TickSuffix))
	}
	return nil
}

func defaultRefused(t pgident.Table, col, have, want string) error {
	if have == "" {
		have = "none"
	}
	return fmt.Errorf("outbox table %s: column %s's default is %s, not the contract's %s (a producer-side default would let rows escape the window read)",
		t, col, have, want)
}

// seqDefaultAs is SeqDefault as the catalog prints it, with the sequence named as
// regclass prints it under the current search_path.
func seqDefaultAs(seqName string) string {
	return `CASE WHEN pg_current_xact_id() IS NOT NULL THEN nextval(` + pgident.QuoteLiteral(seqName) + `::regclass) ELSE NULL::bigint END`
}

// sameExpr compares two expressions as PostgreSQL deparses them, ignoring white space
// and parentheses (which deparsing adds, and which differ between versions) and the
// casts it makes explicit on constants.
func sameExpr(have, want string) bool { return normExpr(have) == normExpr(want) }

func normExpr(s string) string {
	s = strings.NewReplacer("(", "", ")", "", " ", "", "\n", "", "\t", "", "::text", "", "::bigint", "").Replace(s)
	return strings.ToLower(s)
}
