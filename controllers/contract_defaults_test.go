package controllers

import (
	"fmt"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/outbox-operator/outbox-operator/internal/contract"
)

// The CRD's +kubebuilder:default markers cannot name Go constants, so they are the one
// place the worker's defaults are written a second time: this test holds them to
// internal/contract, which the worker's flags and api/v1alpha1's Go defaults use.
func TestCRDDefaultsAreTheWorkerContract(t *testing.T) {
	raw, err := os.ReadFile("../config/crd/bases/outbox.dev_outboxpipelines.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	spec := dig(t, crd, "spec", "versions", 0, "schema", "openAPIV3Schema", "properties", "spec", "properties")
	dur := func(d time.Duration) string { return metaDuration(d) }
	for _, c := range []struct {
		path []any
		want string
	}{
		{[]any{"relay", "properties", "batchSize", "default"}, fmt.Sprint(contract.DefaultBatchSize)},
		{[]any{"relay", "properties", "lease", "default"}, dur(contract.DefaultLease)},
		{[]any{"relay", "properties", "pollInterval", "default"}, dur(contract.DefaultPollInterval)},
		{[]any{"relay", "properties", "maxAttempts", "default"}, fmt.Sprint(contract.DefaultMaxAttempts)},
		{[]any{"relay", "properties", "minBackoff", "default"}, dur(contract.DefaultMinBackoff)},
		{[]any{"relay", "properties", "maxBackoff", "default"}, dur(contract.DefaultMaxBackoff)},
		{[]any{"relay", "properties", "unknownTopicGrace", "default"}, dur(contract.DefaultUnknownTopicGrace)},
		{[]any{"relay", "properties", "logLevel", "default"}, contract.DefaultLogLevel},
		{[]any{"source", "properties", "schema", "default"}, contract.DefaultSchema},
		{[]any{"source", "properties", "table", "default"}, contract.DefaultTable},
	} {
		if got := fmt.Sprint(dig(t, spec, c.path...)); got != c.want {
			t.Errorf("CRD default spec.%v = %s, the worker's is %s", c.path, got, c.want)
		}
	}
}

// metaDuration spells d as the markers do (30s, 5m, 500ms).
func metaDuration(d time.Duration) string {
	switch {
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	default:
		return fmt.Sprintf("%dms", d/time.Millisecond)
	}
}

func dig(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("CRD: %v is not an object at %q", v, k)
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || len(l) <= k {
				t.Fatalf("CRD: no element %d", k)
			}
			v = l[k]
		}
	}
	if v == nil {
		t.Fatalf("CRD: nothing at %v", path)
	}
	return v
}
