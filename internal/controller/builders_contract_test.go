package controller

import (
	"slices"
	"strings"
	"testing"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/config"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// TestMigrateArgsFollowTheContract: a v2 pipeline's migrate init container names the
// contract and the shard count (the spec's, or the default), and the worker's own
// parser reads them back; a v1 pipeline's args stay what they were before the field
// existed, so its pod template (and its rollout hash) does not change.
func TestMigrateArgsFollowTheContract(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mut        func(*outboxv1.PostgresSource)
		wantArgs   []string
		wantShards int
	}{
		{"v1 by default", func(*outboxv1.PostgresSource) {}, []string{"migrate"}, 0},
		{"v1 ignores shards", func(s *outboxv1.PostgresSource) { s.Shards = 64 }, []string{"migrate"}, 0},
		{"v2 default shards", func(s *outboxv1.PostgresSource) { s.Contract = outboxv1.ContractV2 },
			[]string{"migrate", "--contract=v2", "--shards=256"}, 256},
		{"v2 64 shards", func(s *outboxv1.PostgresSource) { s.Contract, s.Shards = outboxv1.ContractV2, 64 },
			[]string{"migrate", "--contract=v2", "--shards=64"}, 64},
		{"v2 one shard", func(s *outboxv1.PostgresSource) { s.Contract, s.Shards = outboxv1.ContractV2, 1 },
			[]string{"migrate", "--contract=v2", "--shards=1"}, 1},
		{"v2 most shards", func(s *outboxv1.PostgresSource) { s.Contract, s.Shards = outboxv1.ContractV2, 32768 },
			[]string{"migrate", "--contract=v2", "--shards=32768"}, 32768},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPipeline(func(p *outboxv1.OutboxPipeline) {
				p.Spec.Source.Migrate = true
				tc.mut(&p.Spec.Source)
			})
			spec := DesiredDeployment(p, "img:1", "hash").Spec.Template.Spec
			if len(spec.InitContainers) != 1 {
				t.Fatalf("%d init containers, want the migrate one", len(spec.InitContainers))
			}
			ic := spec.InitContainers[0]
			if !slices.Equal(ic.Args, tc.wantArgs) {
				t.Errorf("args %q, want %q", ic.Args, tc.wantArgs)
			}
			m, err := config.ParseMigrate(ic.Args[1:], podEnv(ic))
			if err != nil {
				t.Fatalf("migrate refuses what the operator renders: %v", err)
			}
			wantContract := config.ContractV1
			if p.Spec.Source.V2() {
				wantContract = config.ContractV2
			}
			if m.Contract != wantContract || m.Shards != tc.wantShards {
				t.Errorf("migrate would run contract %s shards %d, want %s %d", m.Contract, m.Shards, wantContract, tc.wantShards)
			}
		})
	}
}

// TestDefaultShardsAgree: the CRD's default (contract.DefaultShards, held to the
// marker by TestCRDDefaultsAreTheWorkerContract) is the count the migrate gives a
// table when --shards is absent.
func TestDefaultShardsAgree(t *testing.T) {
	if outboxv1.DefaultShards != schema.DefaultShards {
		t.Errorf("api default %d, schema default %d", outboxv1.DefaultShards, schema.DefaultShards)
	}
}

// TestContractProblem: only a v2 spec on a v1 table is a problem (the migrate refuses
// the upgrade); a v2 table under a v1 spec is what a table made by hand looks like,
// and the relay follows the table.
func TestContractProblem(t *testing.T) {
	tbl := pgident.Table{Schema: "public", Name: "orders_out"}
	for _, tc := range []struct {
		spec  outboxv1.TableContract
		table int
		want  bool
	}{
		{outboxv1.ContractV1, schema.ContractV1, false},
		{outboxv1.ContractV1, schema.ContractV2, false},
		{outboxv1.ContractV2, schema.ContractV2, false},
		{outboxv1.ContractV2, schema.ContractV1, true},
		{outboxv1.ContractV2, schema.ContractNone, false}, // TableMissing says it
		{"", schema.ContractV1, false},
	} {
		for _, migrate := range []bool{false, true} {
			got := contractProblem(outboxv1.PostgresSource{Contract: tc.spec, Migrate: migrate}, tbl, schema.Contract{Version: tc.table})
			if (got != nil) != tc.want {
				t.Errorf("spec %q table v%d migrate %v: problem %v, want %v", tc.spec, tc.table, migrate, got, tc.want)
				continue
			}
			todo := "run `relayworker migrate --contract v2`"
			if migrate {
				todo = "migrate init container upgrades it"
			}
			if got != nil && (got.Reason != outboxv1.ReasonContractMismatch ||
				!strings.Contains(got.Message, "public.orders_out follows table contract v1") ||
				!strings.Contains(got.Message, todo) ||
				!strings.Contains(got.Message, "spec.source.contract back to v1")) {
				t.Errorf("migrate %v: problem %+v", migrate, got)
			}
		}
	}
}
