package plugin

// The test harness: one envtest control plane (a real kube-apiserver with the CRDs
// of config/crd/bases) and one private PostgreSQL for the package. The plugin is run
// through Main with a real kubeconfig file, exactly as kubectl runs it.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
)

var (
	pgSrv   *pgtest.Server
	kube    client.Client
	testEnv *envtest.Environment
	// adminConfig and viewerConfig are kubeconfig files: the viewer may read the
	// outbox kinds but no Secrets.
	adminConfig, viewerConfig string
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	var err error
	if pgSrv, err = pgtest.Start(pgtest.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pgSrv.Stop() //nolint:errcheck // test teardown
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: filepath.Join("..", "..", "..", "bin", "k8s"),
	}
	cfg, err := testEnv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		return 1
	}
	defer testEnv.Stop() //nolint:errcheck // test teardown
	if kube, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "kubectl-outbox-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := writeKubeconfigs(testEnv, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func writeKubeconfigs(env *envtest.Environment, dir string) error {
	admin, err := env.AddUser(envtest.User{Name: "alice", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	viewer, err := env.AddUser(envtest.User{Name: "victor", Groups: []string{"outbox-viewers"}}, nil)
	if err != nil {
		return err
	}
	if err := grantOutboxRead("outbox-viewers"); err != nil {
		return err
	}
	for _, u := range []struct {
		name string
		user *envtest.AuthenticatedUser
		path *string
	}{{"alice", admin, &adminConfig}, {"victor", viewer, &viewerConfig}} {
		b, err := u.user.KubeConfig()
		if err != nil {
			return err
		}
		*u.path = filepath.Join(dir, u.name+".kubeconfig")
		if err := os.WriteFile(*u.path, b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// grantOutboxRead lets group read the three outbox kinds, and nothing else.
func grantOutboxRead(group string) error {
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "outbox-viewer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"outbox.dev"}, Verbs: []string{"get", "list", "watch"},
			Resources: []string{"outboxpipelines", "deadletterreplays", "retentionpolicies"}}},
	}
	if err := kube.Create(ctx, role); err != nil {
		return err
	}
	return kube.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "outbox-viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}},
	})
}

// result is one run of the plugin.
type result struct {
	stdout, stderr string
	code           int
}

// plugin runs `kubectl outbox ARGS` as the admin user.
func plugin(t *testing.T, args ...string) result {
	t.Helper()
	return pluginAs(t, adminConfig, args...)
}

func pluginAs(t *testing.T, kubeconfig string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(append(args, "--kubeconfig", kubeconfig), &out, &errOut)
	return result{out.String(), errOut.String(), code}
}

// mustSucceed fails the test unless the run exited 0.
func (r result) mustSucceed(t *testing.T) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	return r
}

// mustFailWith checks the run failed with exactly one stderr line "error: <want...>".
func (r result) mustFailWith(t *testing.T, code int, want string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "error: ") || !strings.Contains(last, want) {
		t.Fatalf("stderr's last line %q does not contain %q", last, want)
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "warning: ") {
			t.Fatalf("stderr has more than warnings and one error line:\n%s", r.stderr)
		}
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, ".go:") {
		t.Fatalf("stderr looks like a stack trace:\n%s", r.stderr)
	}
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "plugin-"}}
	if err := kube.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func createSecret(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}
	if err := kube.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := kube.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// setStatus writes obj's status through the status subresource, as the operator does.
func setStatus(t *testing.T, obj client.Object) {
	t.Helper()
	if err := kube.Status().Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}
