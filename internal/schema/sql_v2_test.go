package schema

import (
	"fmt"
	"strings"
	"testing"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/testenv/golden"
)

// TestV2StatementsMatchGoldenFiles: the v2 DDL and the checks, as sent, are in
// testdata/<name>.sql (rewrite them with -update), so a change reviews as an SQL diff.
func TestV2StatementsMatchGoldenFiles(t *testing.T) {
	tb := pgident.Table{Schema: "public", Name: "outbox_event"}
	golden.Statements(t, []golden.Statement{
		{Name: "v2_migrate", About: fmt.Sprintf("V2Statements: public.outbox_event, %d shards, separated by ;", DefaultShards),
			SQL: strings.Join(V2Statements(tb, DefaultShards, NewTableEventTypes), ";\n\n") + ";"},
		{Name: "v2_reshard", About: "reshardStatements: to 64 shards, before v2_migrate.sql, only while the table is empty",
			SQL: strings.Join(reshardStatements(tb, 64), ";\n") + ";"},
		{Name: "v2_detect", About: "DetectContract: $1 the table, $2 its contract table", SQL: detectContractSQL},
		{Name: "v2_facts", About: "VerifyV2's catalog facts: $1 the table, $2 its sequence", SQL: v2FactsSQL(tb)},
		{Name: "v2_upgrade_start", About: fmt.Sprintf("upgradeStartStatements: the v1 table public.outbox_event to %d shards, with its NOTIFY trigger (v2_migrate.sql's statements in the middle left out), separated by ;", DefaultShards),
			SQL: strings.Join(upgradeStartWithoutV2(tb), ";\n\n") + ";"},
		{Name: "v2_upgrade_copy", About: fmt.Sprintf("copyChunkSQL: $1 how many v1 rows to scan; %d shards", DefaultShards), SQL: copyChunkSQL(tb, DefaultShards)},
		{Name: "v2_upgrade_finish", About: "finishUpgradeSQL", SQL: finishUpgradeSQL(tb)},
		{Name: "v2_upgrade_state", About: "UpgradeState: $1 the upgrade table", SQL: upgradeStateSQL},
		{Name: "v2_future", About: fmt.Sprintf("VerifyV2's txids from the future: %d shards", DefaultShards), SQL: futureSQL(tb, DefaultShards)},
	})
}

// upgradeStartWithoutV2 is upgradeStartStatements less the V2Statements in it.
func upgradeStartWithoutV2(tb pgident.Table) []string {
	all := upgradeStartStatements(tb, DefaultShards, DefaultUpgradeLockTimeout, true, NewTableEventTypes)
	v2 := V2Statements(tb, DefaultShards, NewTableEventTypes)
	for i := range all {
		if all[i] == v2[0] {
			return append(append(all[:i:i], "-- V2Statements (v2_migrate.sql)"), all[i+len(v2):]...)
		}
	}
	return all
}

// checkV2 refuses the first broken rule, in the order a user should fix them.
func TestCheckV2Decisions(t *testing.T) {
	tb := pgident.Table{Schema: "public", Name: "ob"}
	good := v2Facts{Contract: Contract{Version: ContractV2, Shards: 256}, Txid: "pg_current_xact_id()",
		Seq:            `CASE WHEN (pg_current_xact_id() IS NOT NULL) THEN nextval('ob_seq'::regclass) ELSE NULL::bigint END`,
		Shard:          `((hashtextextended(((aggregate_type || '/'::text) || aggregate_id), (0)::bigint) & (255)::bigint))::smallint`,
		ShardGenerated: true, SeqName: "ob_seq", SeqCache: 1, BatchSeqs: true, CursorLog: true}
	with := func(f func(*v2Facts)) v2Facts { g := good; f(&g); return g }
	cases := []struct {
		name   string
		facts  v2Facts
		shards int
		want   string // "" = accepted
	}{
		{"the contract's table", good, 0, ""},
		{"the same shard count asked for", good, 256, ""},
		{"no table", v2Facts{}, 0, "does not exist"},
		{"v1 table", v2Facts{Contract: Contract{Version: ContractV1}}, 0, "follows contract v1"},
		{"unknown version", with(func(f *v2Facts) { f.Contract.Version = 7 }), 0, "contract version 7 is unknown"},
		{"bad shard count in the contract row", with(func(f *v2Facts) { f.Contract.Shards = 3 }), 0, "says 3 shards"},
		{"shard change with rows", with(func(f *v2Facts) { f.HasRows = true }), 128, "holds events"},
		{"shard change while empty", good, 128, "migrate --shards 128"},
		{"txid default", with(func(f *v2Facts) { f.Txid = "'5'::xid8" }), 0, "column txid's default"},
		{"seq without the CASE", with(func(f *v2Facts) { f.Seq = "nextval('ob_seq'::regclass)" }), 0, "column seq's default"},
		{"seq of another sequence", with(func(f *v2Facts) { f.Seq = strings.Replace(good.Seq, "ob_seq", "other_seq", 1) }), 0, "column seq's default"},
		{"no sequence", with(func(f *v2Facts) { f.SeqName = "" }), 0, "sequence public.ob_seq is missing"},
		{"cache", with(func(f *v2Facts) { f.SeqCache = 32 }), 0, "CACHE 32"},
		{"shard not generated", with(func(f *v2Facts) { f.ShardGenerated = false }), 0, "column shard is not"},
		{"shard of another count", with(func(f *v2Facts) { f.Shard = strings.Replace(good.Shard, "255", "127", 1) }), 0, "column shard is not"},
		{"batch log without seqs", with(func(f *v2Facts) { f.BatchSeqs = false }), 0, "has no seqs column"},
		{"shard table of an earlier build", with(func(f *v2Facts) { f.CursorLog = false }), 0, "run `relayworker migrate`, which converts it"},
		{"future txid", with(func(f *v2Facts) { f.FutureTxid, f.Xmax = "900", "800" }), 0, "txids from the future (900"},
		{"future tick", with(func(f *v2Facts) { f.FutureTick, f.Xmax = "900", "800" }), 0, "ticks from the future"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkV2(tb, tc.facts, tc.shards)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("checkV2 = %v, want %q", err, tc.want)
			}
		})
	}
}
