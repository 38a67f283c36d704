package ops

import (
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// With prometheusRule.enabled and podMonitor.enabled the chart installs the alerts and
// the relay PodMonitor of config/prometheus (same spec, so every check of those files
// holds for the chart's objects); without them it installs neither.
func TestChartInstallsRulesAndPodMonitorWhenAsked(t *testing.T) {
	objs := mustRender(t, map[string]any{
		"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
		"podMonitor":     map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
	})
	for _, c := range []struct{ kind, name, file string }{
		{"PrometheusRule", releaseName, "prometheusrule.yaml"},
		{"PodMonitor", releaseName + "-relay", "podmonitor.yaml"},
	} {
		got := find(t, objs, c.kind, c.name)
		var want map[string]any
		if err := yaml.Unmarshal(readFile(t, repo("config", "prometheus", c.file)), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Object["spec"], want["spec"]) {
			t.Errorf("the chart's %s spec differs from config/prometheus/%s", c.kind, c.file)
		}
		if got.GetNamespace() != releaseNS || got.GetLabels()["release"] != "prometheus" {
			t.Errorf("%s %s: namespace %q, labels %v; want %s and the release label", c.kind, c.name, got.GetNamespace(), got.GetLabels(), releaseNS)
		}
	}
	for _, o := range mustRender(t, nil) {
		if k := o.GetKind(); k == "PrometheusRule" || k == "PodMonitor" {
			t.Errorf("a %s is rendered by default; it needs the Prometheus Operator's CRDs", k)
		}
	}
}
