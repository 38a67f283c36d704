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

// TestMigrateArgsFollowTheContract: the migrate init container always names the
// contract (migrate's own default, v2 for a missing table, must not decide for a v1
// pipeline), a v2 one with the spec's shard count when it names one (none otherwise:
// the migrate keeps the table's count), and the worker's own parser reads them back.
func TestMigrateArgsFollowTheContract(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mut        func(*outboxv1.PostgresSource)
		wantArgs   []string
		wantShards int
	}{
		{"v2 by default", func(*outboxv1.PostgresSource) {},
			[]string{"migrate", "--contract=v2"}, 0},
		{"v1", func(s *outboxv1.PostgresSource) { s.Contract = outboxv1.ContractV1 }, []string{"migrate", "--contract=v1"}, 0},
		{"v1 ignores shards", func(s *outboxv1.PostgresSource) { s.Contract, s.Shards = outboxv1.ContractV1, 64 },
			[]string{"migrate", "--contract=v1"}, 0},
		{"v2 default shards", func(s *outboxv1.PostgresSource) { s.Contract = outboxv1.ContractV2 },
			[]string{"migrate", "--contract=v2"}, 0},
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

// TestContractProblem: a v2 spec on a v1 table is a problem (until the migrate
// upgrades it); a v2 table under a v1 spec is one only with migrate (the init
// container's --contract v1 refuses the table), without it the relay follows the table.
func TestContractProblem(t *testing.T) {
	tbl := pgident.Table{Schema: "public", Name: "orders_out"}
	for _, tc := range []struct {
		spec  outboxv1.TableContract
		table int
		want  bool
	}{
		{outboxv1.ContractV1, schema.ContractV1, false},
		{outboxv1.ContractV2, schema.ContractV2, false},
		{outboxv1.ContractV2, schema.ContractV1, true},
		{outboxv1.ContractV2, schema.ContractNone, false}, // TableMissing says it
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

// TestContractProblemV1SpecOnV2Table: with migrate the condition tells the user to set
// the spec to v2 (the init container refuses the table); without it there is none.
func TestContractProblemV1SpecOnV2Table(t *testing.T) {
	tbl := pgident.Table{Schema: "public", Name: "orders_out"}
	src := outboxv1.PostgresSource{Contract: outboxv1.ContractV1}
	if got := contractProblem(src, tbl, schema.Contract{Version: schema.ContractV2}); got != nil {
		t.Errorf("without migrate: %+v, want none (the relay follows the table)", got)
	}
	src.Migrate = true
	got := contractProblem(src, tbl, schema.Contract{Version: schema.ContractV2})
	if got == nil || got.Reason != outboxv1.ReasonContractMismatch ||
		!strings.Contains(got.Message, "public.orders_out follows table contract v2") ||
		!strings.Contains(got.Message, "set spec.source.contract: v2") {
		t.Errorf("with migrate: %+v, want ContractMismatch telling to set v2", got)
	}
}
