package ops

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/outbox-operator/outbox-operator/internal/cmd/plugin"
)

// `kubectl outbox version` finds the chart's manager Deployment by the labels it
// shares with config/manager, and reads the version from its image tag: the
// chart's appVersion by default, image.tag when set (docs/kubectl-outbox.md#version).
func TestPluginReadsTheChartsOperatorVersion(t *testing.T) {
	for name, tc := range map[string]struct {
		vals map[string]any
		want string
	}{
		"defaults":      {nil, loadChart(t).Metadata.AppVersion},
		"image.tag set": {valueSets["everything set"], "1.2.3"},
	} {
		obj := find(t, mustRender(t, tc.vals), "Deployment", releaseName)
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &d); err != nil {
			t.Fatal(err)
		}
		if !labels.SelectorFromSet(labels.Set(plugin.ManagerLabels)).Matches(labels.Set(d.Labels)) {
			t.Errorf("%s: the plugin's selector %v does not match the Deployment's labels %v", name, plugin.ManagerLabels, d.Labels)
		}
		if got := plugin.OperatorVersion(d); got != tc.want {
			t.Errorf("%s: the plugin reads version %q, want %q", name, got, tc.want)
		}
	}
}
