package main

// These tests run the real binary (this test binary re-executed as main) against an
// envtest API server, the way kubectl runs a plugin: a separate process that finds
// the cluster through $KUBECONFIG or --kubeconfig and --context.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const runMain = "KUBECTL_OUTBOX_TEST_RUN_MAIN"

var kubeconfig string

func TestMain(m *testing.M) {
	if os.Getenv(runMain) == "1" {
		main()
		return
	}
	os.Exit(withAPIServer(m))
}

func withAPIServer(m *testing.M) int {
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: filepath.Join("..", "..", "bin", "k8s"),
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		return 1
	}
	defer env.Stop() //nolint:errcheck // test teardown
	c, err := client.New(cfg, client.Options{})
	if err == nil {
		err = c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}})
	}
	if err == nil {
		kubeconfig, err = writeKubeconfig(env)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(filepath.Dir(kubeconfig))
	return m.Run()
}

// writeKubeconfig writes the envtest admin's kubeconfig with its context renamed to
// "envtest", plus a current context "elsewhere" that points at nothing, so only
// --context envtest reaches the API server.
func writeKubeconfig(env *envtest.Environment) (string, error) {
	u, err := env.AddUser(envtest.User{Name: "alice", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	b, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	cfg, err := clientcmd.Load(b)
	if err != nil {
		return "", err
	}
	good := cfg.Contexts[cfg.CurrentContext].DeepCopy()
	good.Namespace = "shop"
	cfg.Contexts = map[string]*clientcmdapi.Context{"envtest": good}
	bad := cfg.Clusters[good.Cluster].DeepCopy()
	bad.Server = "https://127.0.0.1:1"
	cfg.Clusters["nowhere"] = bad
	cfg.Contexts["elsewhere"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: good.AuthInfo}
	cfg.CurrentContext = "elsewhere"
	dir, err := os.MkdirTemp("", "kubectl-outbox-main-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "config")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// outbox runs the binary with args and extra environment.
func outbox(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), runMain+"=1", "HOME="+t.TempDir()), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errOut.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), 0
}

func TestContextAndNamespaceFromKubeconfig(t *testing.T) {
	out, errOut, code := outbox(t, nil, "status", "--kubeconfig", kubeconfig, "--context", "envtest")
	if code != 0 || !strings.Contains(out, `No OutboxPipelines in namespace shop.`) {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	// $KUBECONFIG works like --kubeconfig; -n overrides the context's namespace.
	out, errOut, code = outbox(t, []string{"KUBECONFIG=" + kubeconfig}, "status", "--context=envtest", "-n", "default")
	if code != 0 || !strings.Contains(out, `No OutboxPipelines in namespace default.`) {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

func TestErrorsAreOneLineWithExitCodes(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"trace", "ev-1", "-p", "orders", "--context", "envtest"}, 1, `error: pipeline "orders" not found in namespace "shop"`},
		{[]string{"status"}, 1, "error: list OutboxPipelines: "}, // the current context points at nothing
		{[]string{"replay", "--context", "envtest"}, 2, "error: --pipeline is required"},
		{[]string{"nonsense"}, 2, `error: unknown command "nonsense"`},
	}
	for _, tc := range cases {
		_, errOut, code := outbox(t, nil, append(tc.args, "--kubeconfig", kubeconfig)...)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if code != tc.code || len(lines) != 1 || !strings.HasPrefix(lines[0], tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line starting %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}

func TestHelp(t *testing.T) {
	out, _, code := outbox(t, nil)
	if code != 0 || !strings.Contains(out, "trace EVENT_ID") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, _, code = outbox(t, nil, "trace", "--help")
	if code != 0 || !strings.Contains(out, "--consumer-db") || !strings.Contains(out, "Connection flags") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// `version --client` needs no kubeconfig at all (HOME is empty); without --client the
// plugin's version comes first, then the one-line error of the unreachable cluster.
func TestVersion(t *testing.T) {
	out, errOut, code := outbox(t, nil, "version", "--client")
	if code != 0 || !strings.HasPrefix(out, "plugin:   dev (go") || errOut != "" {
		t.Fatalf("version --client: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = outbox(t, nil, "version", "--kubeconfig", kubeconfig)
	if code != 1 || !strings.HasPrefix(out, "plugin:   dev (go") || !strings.HasPrefix(errOut, "error: list the operator's Deployments") {
		t.Fatalf("version against the context that points at nothing: exit %d\n%s%s", code, out, errOut)
	}
}
