package ops

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/outbox-operator/outbox-operator/internal/testenv/localstack"
)

// monitoringTypes are the Prometheus Operator's API types that config/prometheus and
// the chart's ServiceMonitor use; their CRDs are generated from this package (the
// version pinned in go.mod) so the API server validates our objects with the real
// OpenAPI schemas.
const monitoringTypes = "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"

var (
	// root is the repository (the root module).
	root = mustAbs("../..")

	stackOnce sync.Once
	stack     *localstack.Stack
	stackErr  error
	// stackLog receives the manager's output.
	stackLog string
	// managerMetricsURL is the manager binary's /metrics.
	managerMetricsURL string
)

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

// repo is a path inside the repository.
func repo(parts ...string) string { return filepath.Join(append([]string{root}, parts...)...) }

func TestMain(m *testing.M) {
	code := m.Run()
	if stack != nil {
		stack.Stop()
	}
	os.Exit(code)
}

// needStack starts the shared control plane, database, broker and manager on first
// use, so tests that only read files (PromQL, schema) stay fast with -run.
func needStack(t *testing.T) *localstack.Stack {
	t.Helper()
	stackOnce.Do(func() { stack, stackErr = startStack() })
	if stackErr != nil {
		t.Fatalf("start the test stack: %v", stackErr)
	}
	return stack
}

func startStack() (*localstack.Stack, error) {
	logf, err := os.CreateTemp("", "test-ops-stack-*.log")
	if err != nil {
		return nil, err
	}
	stackLog = logf.Name()
	// localstack builds ./cmd/manager and ./cmd/relayworker in the module that `go env
	// GOMOD` names: run it from the root module so the binaries are built exactly as the
	// images are, with the root module's dependency versions.
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	if err := os.Chdir(root); err != nil {
		return nil, err
	}
	s, err := localstack.Start(localstack.Options{Out: logf})
	if cerr := os.Chdir(wd); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	crds, err := generateMonitoringCRDs()
	if err == nil {
		_, err = envtest.InstallCRDs(s.Config, envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true})
	}
	if err != nil {
		s.Stop()
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.StartManager("--metrics-bind-address", addr); err != nil {
		s.Stop()
		return nil, err
	}
	managerMetricsURL = "http://" + addr + "/metrics"
	return s, nil
}

// generateMonitoringCRDs runs controller-gen (`make controller-gen` installs it into
// bin/) over the Prometheus Operator's types and returns the three CRDs we use.
func generateMonitoringCRDs() ([]string, error) {
	gen := os.Getenv("CONTROLLER_GEN")
	if gen == "" {
		gen = repo("bin", "controller-gen")
	}
	if _, err := os.Stat(gen); err != nil {
		return nil, fmt.Errorf("controller-gen not found at %s (run `make controller-gen`, or set CONTROLLER_GEN): %w", gen, err)
	}
	dir, err := os.MkdirTemp("", "monitoring-crds-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(gen, "crd", "paths="+monitoringTypes, "output:crd:dir="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("controller-gen %s: %w\n%s", monitoringTypes, err, out)
	}
	var out []string
	for _, k := range []string{"podmonitors", "servicemonitors", "prometheusrules"} {
		out = append(out, filepath.Join(dir, "monitoring.coreos.com_"+k+".yaml"))
	}
	return out, nil
}

// freeAddr is a loopback host:port that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
