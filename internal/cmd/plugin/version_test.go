package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

func TestOperatorVersionIsTheManagerImageTag(t *testing.T) {
	dep := func(labels map[string]string, containers ...corev1.Container) appsv1.Deployment {
		d := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
		d.Spec.Template.Spec.Containers = containers
		return d
	}
	manager := func(image string) corev1.Container { return corev1.Container{Name: "manager", Image: image} }
	digest := "ghcr.io/o/outbox-operator@sha256:0123abcd"
	cases := []struct {
		name string
		d    appsv1.Deployment
		want string
	}{
		{"tag", dep(nil, manager("ghcr.io/o/outbox-operator:v1.2.3")), "v1.2.3"},
		{"the tag wins over the label (chart's image.tag set)", dep(map[string]string{versionLabel: "1.0.0"}, manager("r/outbox-operator:1.0.1")), "1.0.1"},
		{"registry port is not a tag", dep(nil, manager("localhost:5000/outbox-operator")), "latest"},
		{"registry port and tag", dep(nil, manager("localhost:5000/outbox-operator:dev")), "dev"},
		{"digest with the version label", dep(map[string]string{versionLabel: "1.2.3"}, manager(digest)), "1.2.3"},
		{"digest without a label", dep(nil, manager(digest)), "unknown (image pinned by digest)"},
		{"the container named manager, not a sidecar", dep(nil, corev1.Container{Name: "proxy", Image: "envoy:v9"}, manager("op:v2")), "v2"},
	}
	for _, tc := range cases {
		if got := OperatorVersion(tc.d); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// One test, in order: before any operator is installed the plugin says so; then the
// Deployment of config/manager (as config/default renders it) is found cluster-wide,
// and by a user who may list Deployments in its namespace only.
func TestVersionReadsTheOperatorFromTheCluster(t *testing.T) {
	r := plugin(t, "version").mustSucceed(t)
	wantLines(t, r.stdout, "plugin:   dev (go",
		"operator: not found in any namespace (no Deployment labelled app.kubernetes.io/name=outbox-operator,app.kubernetes.io/component=manager)")

	ns := newNamespace(t)
	d := kustomizedManager(t, ns, "registry.example.com:5000/outbox-operator:v1.2.3")
	create(t, d)
	want := "operator: v1.2.3 (Deployment " + ns + "/outbox-operator-controller-manager, image registry.example.com:5000/outbox-operator:v1.2.3, 0/2 ready)"
	wantLines(t, plugin(t, "version").mustSucceed(t).stdout, "plugin:   dev (go", want)

	empty := newNamespace(t)
	local := userListingDeploymentsIn(t, ns, empty)
	wantLines(t, pluginAs(t, local, "version", "-n", ns).mustSucceed(t).stdout, "plugin:   dev (go", want)
	r = pluginAs(t, local, "version", "-n", empty).mustSucceed(t)
	wantLines(t, r.stdout, "plugin:   dev (go", "operator: not found in namespace "+empty+" (you may not list Deployments in every namespace)")
	// Where the user may not list Deployments at all, that is the error.
	r = pluginAs(t, local, "version", "-n", "default")
	r.mustFailWith(t, exitFailed, `cannot list resource "deployments" in API group "apps" in the namespace "default"`)
	wantLines(t, r.stdout, "plugin:   dev (go")
}

func TestVersionWithoutACluster(t *testing.T) {
	var out, errOut strings.Builder
	code := Main([]string{"version", "--client", "--kubeconfig", filepath.Join(t.TempDir(), "missing")}, &out, &errOut)
	if code != 0 || errOut.Len() > 0 {
		t.Fatalf("version --client: exit %d, stderr %q", code, errOut.String())
	}
	wantLines(t, out.String(), "plugin:   dev (go")
	pluginAs(t, viewerConfig, "version").mustFailWith(t, exitFailed, "list the operator's Deployments")
}

// wantLines checks out has exactly len(prefixes) lines, each starting with its prefix.
func wantLines(t *testing.T, out string, prefixes ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != len(prefixes) {
		t.Fatalf("output has %d lines, want %d:\n%s", len(lines), len(prefixes), out)
	}
	for i, p := range prefixes {
		if !strings.HasPrefix(lines[i], p) {
			t.Errorf("line %d is %q, want it to start with %q", i+1, lines[i], p)
		}
	}
}

// kustomizedManager is config/manager's Deployment the way config/default renders it
// (namePrefix outbox-operator-, its namespace) after `kustomize edit set image`.
func kustomizedManager(t *testing.T, ns, image string) *appsv1.Deployment {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		if d.Kind != "Deployment" {
			continue
		}
		d.Namespace, d.Name = ns, "outbox-operator-"+d.Name
		d.Spec.Template.Spec.Containers[0].Image = image
		return &d
	}
	t.Fatal("config/manager/manager.yaml has no Deployment")
	return nil
}

// userListingDeploymentsIn is a kubeconfig of a user who may list Deployments in
// namespaces only.
func userListingDeploymentsIn(t *testing.T, namespaces ...string) string {
	t.Helper()
	u, err := testEnv.AddUser(envtest.User{Name: "nadia", Groups: []string{"deployment-listers"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range namespaces {
		allowListingDeployments(t, ns, "deployment-listers")
	}
	b, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "nadia.kubeconfig")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func allowListingDeployments(t *testing.T, ns, group string) {
	t.Helper()
	create(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "list-deployments"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list"}}}})
	create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "list-deployments"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "list-deployments"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}}})
}
