package ops

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/controller"
)

// The objects of config/prometheus (and the kustomization lists them all) pass a
// server-side dry run against the Prometheus Operator's own CRD schemas.
func TestPrometheusObjectsDryRunOnAPIServer(t *testing.T) {
	var kust struct {
		Namespace string   `json:"namespace"`
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(readFile(t, repo("config", "prometheus", "kustomization.yaml")), &kust); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(repo("config", "prometheus", "*.yaml"))
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" && !slices.Contains(kust.Resources, b) {
			t.Errorf("config/prometheus/kustomization.yaml does not list %s", b)
		}
	}
	s := needStack(t)
	ctx := context.Background()
	if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kust.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, r := range kust.Resources {
		for _, o := range decodeAll(t, readFile(t, repo("config", "prometheus", r))) {
			o.SetNamespace(kust.Namespace)
			kinds[o.GetKind()] = true
			if err := dryRunApply(ctx, s.Client, o); err != nil {
				t.Errorf("%s: server-side dry run of %s %s: %v", r, o.GetKind(), o.GetName(), err)
			}
		}
	}
	for _, k := range []string{"PodMonitor", "ServiceMonitor", "PrometheusRule"} {
		if !kinds[k] {
			t.Errorf("config/prometheus has no %s", k)
		}
	}
	// The CRD schemas are really enforced: a wrong type is refused.
	bad := decodeAll(t, readFile(t, repo("config", "prometheus", "podmonitor.yaml")))[0]
	bad.SetNamespace(kust.Namespace)
	if err := unstructured.SetNestedField(bad.Object, "yes", "spec", "namespaceSelector", "any"); err != nil {
		t.Fatal(err)
	}
	if err := dryRunApply(ctx, s.Client, bad); err == nil {
		t.Fatal("a PodMonitor with namespaceSelector.any: \"yes\" was accepted: the schema is not enforced")
	}
}

func loadMonitor[T any](t *testing.T, file string) *T {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict(readFile(t, repo("config", "prometheus", file)), &v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return &v
}

// The PodMonitor selects exactly the relay pods the operator renders, on their
// metrics port, and no replay or archive pod.
func TestPodMonitorSelectsRelayPods(t *testing.T) {
	pm := loadMonitor[monitoringv1.PodMonitor](t, "podmonitor.yaml")
	if !pm.Spec.NamespaceSelector.Any {
		t.Error("relay pods run in the pipelines' namespaces: the PodMonitor needs namespaceSelector.any")
	}
	sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	p := (&outboxv1.OutboxPipeline{ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop"}}).WithDefaults()
	dep := controller.DesiredDeployment(p, "outbox-relayworker:test", "hash")
	if !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("PodMonitor selector %s does not match the relay pod labels %v", sel, dep.Spec.Template.Labels)
	}
	var ports []string
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, port := range c.Ports {
			ports = append(ports, port.Name)
		}
	}
	for _, ep := range pm.Spec.PodMetricsEndpoints {
		if ep.Port == nil || !slices.Contains(ports, *ep.Port) {
			t.Errorf("PodMonitor scrapes port %v; the relay container has %v", ep.Port, ports)
		}
	}
	// The metrics Service the operator creates carries the same labels, so the
	// PodMonitor's alternative (a ServiceMonitor on it) would select it too.
	svc := controller.DesiredService(p)
	if !sel.Matches(labels.Set(svc.Labels)) {
		t.Errorf("the relay metrics Service labels %v differ from the pods' %v", svc.Labels, dep.Spec.Template.Labels)
	}
}

// The manager's ServiceMonitor selects the metrics Service of both installs: the
// kustomize one (config/manager) and the chart's.
func TestServiceMonitorSelectsManagerService(t *testing.T) {
	sm := loadMonitor[monitoringv1.ServiceMonitor](t, "servicemonitor.yaml")
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	var services []*unstructured.Unstructured
	for _, o := range decodeAll(t, readFile(t, repo("config", "manager", "manager.yaml"))) {
		if o.GetKind() == "Service" {
			services = append(services, o)
		}
	}
	services = append(services, find(t, mustRender(t, nil), "Service", releaseName+"-metrics"))
	for _, svc := range services {
		if !sel.Matches(labels.Set(svc.GetLabels())) {
			t.Errorf("ServiceMonitor selector %s does not match Service %s labels %v", sel, svc.GetName(), svc.GetLabels())
		}
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		var names []string
		for _, p := range ports {
			names = append(names, p.(map[string]any)["name"].(string))
		}
		for _, ep := range sm.Spec.Endpoints {
			if !slices.Contains(names, ep.Port) {
				t.Errorf("ServiceMonitor scrapes port %q; Service %s has %v", ep.Port, svc.GetName(), names)
			}
			if !ep.HonorLabels {
				t.Error("the manager's series carry the pipeline's namespace: honorLabels must be true")
			}
		}
	}
}
