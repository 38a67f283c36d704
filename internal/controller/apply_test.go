package controller

import (
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// What is applied is what the builders decide and nothing else: no status (its zero
// counters would be sent as values), no null creationTimestamp, and apiVersion/kind.
func TestApplyContentIsOnlyTheBuildersFields(t *testing.T) {
	p := testPipeline()
	rp := (&outboxv1.RetentionPolicy{Spec: outboxv1.RetentionPolicySpec{PipelineRef: outboxv1.PipelineReference{Name: "orders"}}}).WithDefaults()
	rp.Name, rp.Namespace = "orders", "shop"
	replay := (&outboxv1.DeadLetterReplay{Spec: outboxv1.DeadLetterReplaySpec{Reason: "r"}}).WithDefaults()
	replay.Name, replay.Namespace = "fix", "shop"
	s := testScheme(t)
	for _, obj := range []client.Object{
		DesiredServiceAccount(p), DesiredService(p), DesiredPDB(p), DesiredDeployment(p, "img:1", "h"),
		DesiredReplayJob(replay, p, "img:1"), DesiredRetentionCronJob(rp, p, "img:1"),
	} {
		gvk, err := apiutil.GVKForObject(obj, s)
		if err != nil {
			t.Fatal(err)
		}
		u, err := applyContent(obj, gvk)
		if err != nil {
			t.Fatal(err)
		}
		if u.GroupVersionKind() != gvk || gvk == (schema.GroupVersionKind{}) {
			t.Errorf("%T: applied as %v, want %v", obj, u.GroupVersionKind(), gvk)
		}
		if _, ok := u.Object["status"]; ok {
			t.Errorf("%s: status is applied", gvk.Kind)
		}
		if path := nullAt(u.Object, gvk.Kind); path != "" {
			t.Errorf("explicit null at %s", path)
		}
	}
}

// nullAt is the path of the first nil value in v, "" when there is none.
func nullAt(v any, path string) string {
	switch x := v.(type) {
	case nil:
		return path
	case map[string]any:
		for k, e := range x {
			if p := nullAt(e, path+"."+k); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range x {
			if p := nullAt(e, path+"["+strconv.Itoa(i)+"]"); p != "" {
				return p
			}
		}
	}
	return ""
}

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := outboxv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// copyObject leaves dst holding src, status included, with nothing shared: of one Go
// type directly, of two (a typed and an unstructured object) through content.
func TestCopyObject(t *testing.T) {
	p := testPipeline()
	live := DesiredDeployment(p, "img:1", "h")
	live.ResourceVersion, live.Status.ReadyReplicas = "42", 2
	dst := DesiredDeployment(p, "img:2", "other")
	if err := copyObject(live, dst); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(dst, live) {
		t.Fatalf("typed copy differs:\n%+v\nwant\n%+v", dst, live)
	}
	dst.Spec.Template.Spec.Containers[0].Image = "changed"
	if live.Spec.Template.Spec.Containers[0].Image != "img:1" {
		t.Fatal("the copy shares the container list with its source")
	}
	live.APIVersion, live.Kind = "apps/v1", "Deployment" // unstructured content needs them
	u := &unstructured.Unstructured{}
	if err := copyObject(live, u); err != nil {
		t.Fatal(err)
	}
	if u.GetResourceVersion() != "42" || u.Object["status"].(map[string]any)["readyReplicas"] != int64(2) {
		t.Fatalf("copy into unstructured: %v", u.Object)
	}
}
