package ops

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// valueSets are the installs the chart must render and the API server must accept.
var valueSets = map[string]map[string]any{
	"defaults": nil,
	"everything set": {
		"replicas":                3,
		"watchNamespaces":         []any{"shop", "billing"},
		"databaseMaxConnections":  5,
		"kubeAPIQPS":              50,
		"kubeAPIBurst":            80,
		"maxConcurrentReconciles": 8,
		"leaderElection":          map[string]any{"enabled": true, "namespace": "outbox-leases"},
		"logLevel":                "debug",
		"logEncoder":              "console",
		"relayImage":              "registry.example.com/outbox-relayworker:1.2.3",
		"image":                   map[string]any{"repository": "registry.example.com/outbox-operator", "tag": "1.2.3", "pullPolicy": "Always"},
		"imagePullSecrets":        []any{map[string]any{"name": "regcred"}},
		"resources":               map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}, "limits": map[string]any{"memory": "512Mi"}},
		"metrics": map[string]any{"port": 9090, "service": map[string]any{"port": 9443},
			"serviceMonitor": map[string]any{"enabled": true, "interval": "15s", "labels": map[string]any{"release": "prometheus"}}},
		"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
		"podMonitor":     map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
		"serviceAccount": map[string]any{"annotations": map[string]any{"example.com/role": "outbox"}},
		"podAnnotations": map[string]any{"example.com/scrape": "false"},
		"podLabels":      map[string]any{"team": "platform"},
		"nodeSelector":   map[string]any{"kubernetes.io/os": "linux"},
		"tolerations":    []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "ops", "effect": "NoSchedule"}},
	},
	"one manager, no metrics, own service account": {
		"replicas":       1,
		"leaderElection": map[string]any{"enabled": false},
		"metrics":        map[string]any{"enabled": false},
		"rbac":           map[string]any{"create": false},
		"serviceAccount": map[string]any{"create": false, "name": "existing"},
	},
}

func TestChartLint(t *testing.T) {
	for name, vals := range valueSets {
		lint := action.NewLint()
		lint.Strict = true // warnings fail too
		lint.Namespace = releaseNS
		res := lint.Run([]string{repo(chartDir)}, vals)
		for _, m := range res.Messages {
			t.Logf("%s: lint: %s", name, m)
		}
		if len(res.Errors) > 0 {
			t.Errorf("%s: helm lint --strict: %v", name, res.Errors)
		}
	}
}

// The rendered manifests are applied with a server-side dry run (strict field
// validation) to a real kube-apiserver: every kind, field and value must be accepted.
func TestChartDryRunOnAPIServer(t *testing.T) {
	s := needStack(t)
	ctx := context.Background()
	for _, ns := range []string{releaseNS, "outbox-leases"} {
		err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for name, vals := range valueSets {
		objs := mustRender(t, vals)
		find(t, objs, "Deployment", releaseName)
		for _, o := range objs {
			if err := dryRunApply(ctx, s.Client, o); err != nil {
				t.Errorf("%s: server-side dry run of %s %s: %v", name, o.GetKind(), o.GetName(), err)
			}
		}
	}
	// The dry run must be able to fail: a misspelt field is refused, not dropped.
	bad := find(t, mustRender(t, nil), "Deployment", releaseName)
	if err := unstructured.SetNestedField(bad.Object, int64(2), "spec", "replica"); err != nil {
		t.Fatal(err)
	}
	if err := dryRunApply(ctx, s.Client, bad); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("a Deployment with spec.replica was accepted (err %v): the dry run validates nothing", err)
	}
}

func dryRunApply(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	//nolint:staticcheck // client.Apply is the only apply that takes FieldValidation.
	return c.Patch(ctx, o, client.Apply, client.DryRunAll, client.ForceOwnership,
		client.FieldOwner("test-ops"), client.FieldValidation("Strict"))
}

// Every flag the Deployment passes exists in the manager binary, and the values
// reach it.
func TestChartDeploymentFlags(t *testing.T) {
	s := needStack(t)
	out, _ := exec.Command(filepath.Join(s.BinDir, "manager"), "-h").CombinedOutput()
	defined := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		defined[m[1]] = true
	}
	if !defined["leader-elect"] || !defined["zap-log-level"] {
		t.Fatalf("cannot read the manager's flags from -h:\n%s", out)
	}
	for name, vals := range valueSets {
		args := managerArgs(t, mustRender(t, vals))
		for _, a := range args {
			flag := strings.SplitN(strings.TrimLeft(a, "-"), "=", 2)[0]
			if !defined[flag] {
				t.Errorf("%s: the Deployment passes %s, which the manager does not define", name, a)
			}
		}
	}
	args := managerArgs(t, mustRender(t, valueSets["everything set"]))
	for _, want := range []string{"--leader-elect=true", "--leader-election-namespace=outbox-leases",
		"--metrics-bind-address=:9090", "--relay-image=registry.example.com/outbox-relayworker:1.2.3",
		"--watch-namespaces=shop,billing", "--database-max-connections=5", "--kube-api-qps=50", "--kube-api-burst=80", "--max-concurrent-reconciles=8", "--zap-log-level=debug", "--zap-encoder=console"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
	if args := managerArgs(t, mustRender(t, valueSets["one manager, no metrics, own service account"])); !slices.Contains(args, "--metrics-bind-address=0") {
		t.Errorf("metrics.enabled=false must turn the endpoint off; args %v", args)
	}
}

func managerArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	dep := find(t, objs, "Deployment", releaseName)
	cs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("want one manager container, got %d", len(cs))
	}
	args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
	return args
}

// values.schema.json turns a value of the wrong type into a clear install error.
func TestChartSchemaRejectsWrongValues(t *testing.T) {
	cases := []struct {
		vals map[string]any
		want []string // all in the error
	}{
		{map[string]any{"replicas": "two"}, []string{"at '/replicas': got string, want integer"}},
		{map[string]any{"leaderElection": map[string]any{"enabled": "yes"}}, []string{"at '/leaderElection/enabled': got string, want boolean"}},
		{map[string]any{"metrics": map[string]any{"port": 70000}}, []string{"at '/metrics/port'", "65,535"}},
		{map[string]any{"watchNamespaces": "shop"}, []string{"at '/watchNamespaces': got string, want array"}},
		{map[string]any{"logLevel": "loud"}, []string{"at '/logLevel'", "'loud' does not match"}},
		{map[string]any{"replica": 2}, []string{"additional properties 'replica' not allowed"}}, // a misspelt key
	}
	for _, c := range cases {
		_, err := render(t, c.vals)
		if err == nil {
			t.Errorf("%v was accepted", c.vals)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error does not name %q: %v", c.vals, w, err)
			}
		}
		t.Logf("%v -> %v", c.vals, err)
	}
	// More than one manager without leader election would reconcile twice.
	_, err := render(t, map[string]any{"replicas": 2, "leaderElection": map[string]any{"enabled": false}})
	if err == nil || !strings.Contains(err.Error(), "leaderElection.enabled") {
		t.Errorf("replicas 2 without leader election: %v", err)
	}
}

// With the ServiceMonitor on, it selects the chart's metrics Service by its labels and
// port name, and keeps the pipelines' namespace label.
func TestChartServiceMonitorSelectsMetricsService(t *testing.T) {
	objs := mustRender(t, valueSets["everything set"])
	svc := find(t, objs, "Service", releaseName+"-metrics")
	sm := find(t, objs, "ServiceMonitor", releaseName)
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if len(sel) == 0 {
		t.Fatal("ServiceMonitor has no selector")
	}
	for k, v := range sel {
		if svc.GetLabels()[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s; the Service has %q", k, v, svc.GetLabels()[k])
		}
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if len(eps) != 1 || len(ports) != 1 {
		t.Fatalf("endpoints %v, ports %v", eps, ports)
	}
	if ep, port := eps[0].(map[string]any), ports[0].(map[string]any); ep["port"] != port["name"] || ep["honorLabels"] != true {
		t.Errorf("endpoint %v does not scrape port %v with honorLabels", ep, port["name"])
	}
	if sm.GetLabels()["release"] != "prometheus" {
		t.Errorf("metrics.serviceMonitor.labels not applied: %v", sm.GetLabels())
	}
	for _, o := range mustRender(t, nil) {
		if o.GetKind() == "ServiceMonitor" {
			t.Error("the ServiceMonitor is rendered by default; it needs the Prometheus Operator's CRDs")
		}
	}
}
