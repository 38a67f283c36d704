package controller

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/outbox-operator/outbox-operator/internal/contract"
)

// The CRD's +kubebuilder:default markers cannot name Go constants, so they are the one
// place the worker's defaults are written a second time: this test holds them to
// internal/contract, which the worker's flags and api/v1alpha1's Go defaults use.
func TestCRDDefaultsAreTheWorkerContract(t *testing.T) {
	dur := metaDuration
	for _, crd := range []struct {
		file   string
		checks map[string]string // dotted path under spec.properties -> default
	}{
		{"outbox.dev_outboxpipelines.yaml", map[string]string{
			"relay.batchSize":         fmt.Sprint(contract.DefaultBatchSize),
			"relay.lease":             dur(contract.DefaultLease),
			"relay.pollInterval":      dur(contract.DefaultPollInterval),
			"relay.maxAttempts":       fmt.Sprint(contract.DefaultMaxAttempts),
			"relay.minBackoff":        dur(contract.DefaultMinBackoff),
			"relay.maxBackoff":        dur(contract.DefaultMaxBackoff),
			"relay.unknownTopicGrace": dur(contract.DefaultUnknownTopicGrace),
			"relay.logLevel":          contract.DefaultLogLevel,
			"source.schema":           contract.DefaultSchema,
			"source.table":            contract.DefaultTable,
			"source.contract":         "v2", // migrate without --contract creates v2 (issue 21)
		}},
		{"outbox.dev_deadletterreplays.yaml", map[string]string{
			"rate":              fmt.Sprint(contract.DefaultReplayRate),
			"canarySize":        fmt.Sprint(contract.DefaultCanarySize),
			"maxNewDeadPercent": fmt.Sprint(contract.DefaultMaxNewDeadPercent),
			"consumer.schema":   contract.DefaultSchema,
			"consumer.limit":    fmt.Sprint(contract.DefaultInboxReplayLimit),
		}},
		{"outbox.dev_retentionpolicies.yaml", map[string]string{
			"sentRetention": dur(contract.DefaultSentRetention),
			"deadRetention": dur(contract.DefaultDeadRetention),
			"batchSize":     fmt.Sprint(contract.DefaultArchiveBatchSize),
			"mode":          contract.DefaultArchiveMode, // the CRD spells it Archive; the builder lowercases it
		}},
	} {
		raw, err := os.ReadFile("../../config/crd/bases/" + crd.file)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		spec := dig(t, doc, "spec", "versions", 0, "schema", "openAPIV3Schema", "properties", "spec", "properties")
		for path, want := range crd.checks {
			var p []any
			for i, part := range strings.Split(path, ".") {
				if i > 0 {
					p = append(p, "properties")
				}
				p = append(p, part)
			}
			// Case-insensitive: enum values are capitalised in the API and lowercased
			// by the builders (mode: Archive -> archive).
			if got := fmt.Sprint(dig(t, spec, append(p, "default")...)); !strings.EqualFold(got, want) {
				t.Errorf("%s: default of spec.%s is %s, the worker's is %s", crd.file, path, got, want)
			}
		}
	}
}

// TestShardsHaveNoCRDDefault: spec.source.shards stays unset unless a user sets it.
// The apiserver fills a default into every object it reads, also into one created
// before the field existed, whose table has the count of that day (256): a rendered
// --shards of today's default would ask the migrate to change it, and on a table
// with rows the init container would fail. Unset, the migrate keeps the table's count.
func TestShardsHaveNoCRDDefault(t *testing.T) {
	raw, err := os.ReadFile("../../config/crd/bases/outbox.dev_outboxpipelines.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	shards, ok := dig(t, doc, "spec", "versions", 0, "schema", "openAPIV3Schema", "properties", "spec", "properties",
		"source", "properties", "shards").(map[string]any)
	if !ok {
		t.Fatal("CRD: spec.source.shards is not an object")
	}
	if d, ok := shards["default"]; ok {
		t.Errorf("spec.source.shards has the default %v, want none", d)
	}
}

// metaDuration spells d as the markers do (30s, 5m, 168h, 500ms).
func metaDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
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
