package gitops

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// argocdKey is the argocd-cm key Argo CD reads a kind's health script from.
func argocdKey(kind string) string { return "resource.customizations.health.outbox.dev_" + kind }

var kinds = []string{"OutboxPipeline", "DeadLetterReplay", "RetentionPolicy"}

// TestArgoCDPatchMatchesScripts: config/argocd/argocd-cm-patch.yaml carries exactly
// the scripts the tests run. UPDATE_ARGOCD_PATCH=1 rewrites it from them.
func TestArgoCDPatchMatchesScripts(t *testing.T) {
	path := filepath.Join(repoRoot, "config", "argocd", "argocd-cm-patch.yaml")
	if os.Getenv("UPDATE_ARGOCD_PATCH") != "" {
		must(t, os.WriteFile(path, []byte(renderPatch(t)), 0o644))
	}
	b, err := os.ReadFile(path)
	must(t, err)
	var cm corev1.ConfigMap
	must(t, yaml.UnmarshalStrict(b, &cm))
	if cm.Name != "argocd-cm" || len(cm.Data) != len(kinds) {
		t.Fatalf("%s: want ConfigMap argocd-cm with %d keys, got %q with %d", path, len(kinds), cm.Name, len(cm.Data))
	}
	for _, kind := range kinds {
		if cm.Data[argocdKey(kind)] != script(t, kind) {
			t.Errorf("%s: %s differs from config/argocd/%s; run UPDATE_ARGOCD_PATCH=1 go test ./... in test/gitops", path, argocdKey(kind), scripts[kind])
		}
	}
}

// renderPatch is the patch file for the current scripts.
func renderPatch(t *testing.T) string {
	var sb strings.Builder
	sb.WriteString(patchHeader)
	for _, kind := range kinds {
		sb.WriteString("  " + argocdKey(kind) + ": |\n")
		for _, line := range strings.SplitAfter(strings.TrimSuffix(script(t, kind), "\n"), "\n") {
			if strings.TrimSpace(line) == "" {
				sb.WriteString("\n")
				continue
			}
			sb.WriteString("    " + line)
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

const patchHeader = `# Argo CD health checks for the outbox.dev kinds (docs/argocd-health.md). Merge into
# argocd-cm, e.g.:
#   kubectl -n argocd patch configmap argocd-cm --patch-file config/argocd/argocd-cm-patch.yaml
# Generated from the *-health.lua files next to it; test/gitops checks they agree
# (UPDATE_ARGOCD_PATCH=1 go test ./... in test/gitops rewrites this file).
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  namespace: argocd
  labels:
    app.kubernetes.io/part-of: argocd
data:
`

// TestDocsShowTheScripts: docs/argocd-health.md quotes each script as it is.
func TestDocsShowTheScripts(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "argocd-health.md"))
	must(t, err)
	doc := string(b)
	for _, kind := range kinds {
		if !strings.Contains(doc, "```lua\n"+script(t, kind)+"```\n") {
			t.Errorf("docs/argocd-health.md does not quote config/argocd/%s verbatim in a ```lua block", scripts[kind])
		}
		if !strings.Contains(doc, argocdKey(kind)) {
			t.Errorf("docs/argocd-health.md does not name the argocd-cm key %s", argocdKey(kind))
		}
	}
}
