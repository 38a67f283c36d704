package ops

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

const syncHint = "run `make chart-crds` (it also runs after `make manifests`)"

// The chart's CRDs are config/crd/bases, byte for byte: one file each, none extra.
func TestChartCRDsEqualConfig(t *testing.T) {
	want := dirFiles(t, repo("config", "crd", "bases"))
	got := dirFiles(t, repo(chartDir, "crds"))
	if len(want) == 0 {
		t.Fatal("config/crd/bases has no CRDs")
	}
	for name, b := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("chart lacks CRD %s; %s", name, syncHint)
		} else if !bytes.Equal(g, b) {
			t.Errorf("chart CRD %s differs from config/crd/bases; %s", name, syncHint)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("chart has CRD %s that config/crd/bases does not; %s", name, syncHint)
		}
	}
}

// The chart's alerts and relay PodMonitor are config/prometheus's, byte for byte: the
// chart's templates read them from files/, so there is one set of rules.
func TestChartMonitoringFilesEqualConfig(t *testing.T) {
	for _, f := range []string{"prometheusrule.yaml", "podmonitor.yaml"} {
		if !bytes.Equal(readFile(t, repo(chartDir, "files", f)), readFile(t, repo("config", "prometheus", f))) {
			t.Errorf("charts/outbox-operator/files/%s differs from config/prometheus/%s; %s", f, f, syncHint)
		}
	}
}

func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		out[filepath.Base(p)] = readFile(t, p)
	}
	return out
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The rendered RBAC grants exactly what config/rbac grants: the generated manager
// role, the leader-election role, and the aggregated editor and viewer roles.
func TestChartRBACEqualsConfig(t *testing.T) {
	if !bytes.Equal(readFile(t, repo(chartDir, "files", "manager-role.yaml")), readFile(t, repo("config", "rbac", "role.yaml"))) {
		t.Errorf("charts/outbox-operator/files/manager-role.yaml differs from config/rbac/role.yaml; %s", syncHint)
	}
	objs := mustRender(t, nil)
	pairs := []struct{ config, kind, chartName string }{
		{"role.yaml", "ClusterRole", releaseName + "-manager"},
		{"leader_election_role.yaml", "Role", releaseName + "-leader-election"},
		{"outbox_editor_role.yaml", "ClusterRole", releaseName + "-editor"},
		{"outbox_viewer_role.yaml", "ClusterRole", releaseName + "-viewer"},
	}
	for _, p := range pairs {
		var want rbacv1.ClusterRole // Role has the same rules field
		if err := yaml.Unmarshal(readFile(t, repo("config", "rbac", p.config)), &want); err != nil {
			t.Fatalf("%s: %v", p.config, err)
		}
		var got rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, objs, p.kind, p.chartName).Object, &got); err != nil {
			t.Fatal(err)
		}
		if len(want.Rules) == 0 || !reflect.DeepEqual(got.Rules, want.Rules) {
			t.Errorf("%s %s rules differ from config/rbac/%s:\nchart:  %+v\nconfig: %+v", p.kind, p.chartName, p.config, got.Rules, want.Rules)
		}
		// The aggregation labels are what make the editor and viewer roles useful.
		for k, v := range want.Labels {
			if strings.HasPrefix(k, "rbac.authorization.k8s.io/") && got.Labels[k] != v {
				t.Errorf("%s lacks label %s=%s", p.chartName, k, v)
			}
		}
	}
	// Every binding names the chart's ServiceAccount in the release namespace.
	sa := find(t, objs, "ServiceAccount", releaseName)
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, o := range objs {
			if o.GetKind() != kind {
				continue
			}
			var b rbacv1.RoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
				t.Fatal(err)
			}
			if len(b.Subjects) != 1 || b.Subjects[0].Name != sa.GetName() || b.Subjects[0].Namespace != releaseNS {
				t.Errorf("%s %s binds %+v, not ServiceAccount %s/%s", kind, o.GetName(), b.Subjects, releaseNS, sa.GetName())
			}
		}
	}
}
