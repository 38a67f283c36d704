package gitops

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// healthCase is one real state of an object and what GitOps tools should make of it.
type healthCase struct {
	name string
	obj  *unstructured.Unstructured
	// kstatus is what kstatus should compute by its conventions; today is what it
	// computes from the operator's status as it is. They differ where the status lacks
	// a condition kstatus reads, and gap names it (docs/argocd-health.md, "kstatus").
	kstatus, today status.Status
	gap            string
	// argo and argoMsg are the Argo CD health status and a part of its message.
	argo, argoMsg string
}

// check runs kstatus and the kind's Argo CD script on the case's object.
func (c healthCase) check(t *testing.T) {
	t.Helper()
	res, err := status.Compute(c.obj)
	must(t, err)
	if res.Status != c.today {
		t.Errorf("%s: kstatus says %s (%s), the test expects %s today; if a gap closed, update the case and docs/argocd-health.md",
			describe(c.obj), res.Status, res.Message, c.today)
	}
	c.checkArgo(t, c.obj)
	if c.today != c.kstatus {
		t.Logf("kstatus gap: %s is %s, should be %s: %s", describe(c.obj), c.today, c.kstatus, c.gap)
		c.checkProposal(t)
	}
}

func (c healthCase) checkArgo(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	h, err := runHealthScript(script(t, obj.GetKind()), obj)
	must(t, err)
	if h.Status != c.argo || !strings.Contains(h.Message, c.argoMsg) {
		t.Errorf("%s: Argo CD health %s %q, want %s with %q", describe(obj), h.Status, h.Message, c.argo, c.argoMsg)
	}
}

// checkProposal shows that the condition the gap names closes it: with it added,
// kstatus says what it should, and the Argo CD script still says the same.
func (c healthCase) checkProposal(t *testing.T) {
	t.Helper()
	fixed, how := propose(t, c.obj, c.kstatus)
	res, err := status.Compute(fixed)
	must(t, err)
	if res.Status != c.kstatus {
		t.Errorf("%s with %s: kstatus says %s, want %s", describe(c.obj), how, res.Status, c.kstatus)
	}
	c.checkArgo(t, fixed)
}

// propose adds what the operator would have to write for kstatus to say want:
// Stalled=True (Failed), Reconciling=True (InProgress), or Ready=True (Current).
func propose(t *testing.T, obj *unstructured.Unstructured, want status.Status) (*unstructured.Unstructured, string) {
	t.Helper()
	u := obj.DeepCopy()
	conds, _, err := unstructured.NestedSlice(u.Object, "status", "conditions")
	must(t, err)
	ready := findCondition(conds, "Ready")
	var how string
	switch want {
	case status.FailedStatus:
		how = "Stalled=True"
		conds = append(conds, map[string]any{"type": "Stalled", "status": "True", "reason": ready["reason"], "message": ready["message"]})
	case status.InProgressStatus:
		how = "Reconciling=True"
		conds = append(conds, map[string]any{"type": "Reconciling", "status": "True", "reason": "RollingOut", "message": "in progress"})
	default:
		how = "Ready=True"
		ready["status"] = "True"
	}
	must(t, unstructured.SetNestedSlice(u.Object, conds, "status", "conditions"))
	return u, how
}

func findCondition(conds []any, typ string) map[string]any {
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return map[string]any{}
}

func runCases(t *testing.T, cases []healthCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, c.check)
	}
}
