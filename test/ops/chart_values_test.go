package ops

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
)

// Values that contradict each other fail the install with a message that says which
// and why, instead of rendering something that does not work (or nothing, silently).
func TestChartRefusesContradictoryValues(t *testing.T) {
	cases := []struct {
		vals map[string]any
		want string
	}{
		{map[string]any{"metrics": map[string]any{"port": 8081}},
			"metrics.port and healthProbe.port are both 8081"},
		{map[string]any{"healthProbe": map[string]any{"port": 8080}},
			"metrics.port and healthProbe.port are both 8080"},
		{map[string]any{"metrics": map[string]any{"enabled": false, "serviceMonitor": map[string]any{"enabled": true}}},
			"metrics.serviceMonitor.enabled=true needs metrics.enabled=true"},
		{map[string]any{"metrics": map[string]any{"service": map[string]any{"enabled": false}, "serviceMonitor": map[string]any{"enabled": true}}},
			"metrics.serviceMonitor.enabled=true needs metrics.service.enabled=true"},
		{map[string]any{"metrics": map[string]any{"enabled": false}, "prometheusRule": map[string]any{"enabled": true}},
			"prometheusRule.enabled=true needs metrics.enabled=true"},
		{map[string]any{"kubeAPIBurst": 50},
			"kubeAPIBurst needs kubeAPIQPS"},
		{map[string]any{"maxConcurrentReconciles": 0},
			"at '/maxConcurrentReconciles': minimum: got 0, want 1"},
		{map[string]any{"podMonitor": map[string]any{"enabled": "yes"}},
			"at '/podMonitor/enabled': got string, want boolean"},
		{map[string]any{"prometheusRule": map[string]any{"label": map[string]any{}}},
			"additional properties 'label' not allowed"},
	}
	for _, c := range cases {
		_, err := render(t, c.vals)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one that says %q", c.vals, err, c.want)
			continue
		}
		t.Logf("%v -> %v", c.vals, err)
	}
	// The same ports are fine while metrics are off: nothing listens on metrics.port.
	objs := mustRender(t, map[string]any{"metrics": map[string]any{"enabled": false, "port": 8081}})
	find(t, objs, "Deployment", releaseName)
}

// `helm template` has no cluster to ask its version: Helm checks the chart's
// kubeVersion against its built-in default, which a Helm built without release flags
// (and the Helm library) sets to v1.20.0. The error names the constraint, and
// docs/monitoring.md says to pass --kube-version.
func TestChartTemplateWithoutClusterNeedsKubeVersion(t *testing.T) {
	in := action.NewInstall(&action.Configuration{Log: t.Logf})
	in.DryRun, in.ClientOnly, in.Replace = true, true, true
	in.ReleaseName, in.Namespace = releaseName, releaseNS
	_, err := in.Run(loadChart(t), nil)
	const helmSays = "chart requires kubeVersion: >=1.27.0-0 which is incompatible with Kubernetes v1.20.0"
	if err == nil || !strings.Contains(err.Error(), helmSays) {
		t.Fatalf("render without a kube version: %v, want %q", err, helmSays)
	}
	doc := string(readFile(t, repo("docs", "monitoring.md")))
	for _, w := range []string{helmSays, "--kube-version"} {
		if !strings.Contains(doc, w) {
			t.Errorf("docs/monitoring.md does not say %q", w)
		}
	}
	// With the version given (what render does), it renders.
	find(t, mustRender(t, nil), "Deployment", releaseName)
}
