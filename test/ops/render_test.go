package ops

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

const (
	chartDir = "charts/outbox-operator"
	// releaseName equals the chart name, so the objects are named outbox-operator-*.
	releaseName = "outbox-operator"
	releaseNS   = "outbox-system"
	// kubeVersion is what bin/k8s runs (hack/envtest-assets.sh K8S_VERSION); that
	// apiserver is built from source and reports v0.0.0, so it is named here.
	kubeVersion = "v1.37.2"
)

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(repo(chartDir))
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return ch
}

// render is `helm template` through the library: an install with DryRun and
// ClientOnly, which also validates vals against values.schema.json.
func render(t *testing.T, vals map[string]any) (string, error) {
	t.Helper()
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	in := action.NewInstall(&action.Configuration{Log: t.Logf})
	in.DryRun, in.ClientOnly, in.Replace = true, true, true
	in.ReleaseName, in.Namespace, in.KubeVersion = releaseName, releaseNS, kv
	rel, err := in.Run(loadChart(t), vals)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// mustRender renders and splits the manifest into objects.
func mustRender(t *testing.T, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	manifest, err := render(t, vals)
	if err != nil {
		t.Fatalf("render with %v: %v", vals, err)
	}
	return decodeAll(t, []byte(manifest))
}

// decodeAll splits a multi-document YAML stream into objects, skipping empty ones.
func decodeAll(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decode YAML: %v", err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// find returns the object of kind whose name ends with suffix, failing t if absent.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("rendered chart has no %s %q", kind, name)
	return nil
}
