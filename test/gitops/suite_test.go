// Package gitops checks how GitOps tools read the operator's status: kstatus (Flux,
// kpt, cli-utils' apply --reconcile) and the Argo CD health checks in config/argocd.
// The objects come from a real kube-apiserver (envtest) written by the real
// reconcilers (controller.SetupAll) against a real PostgreSQL; only what envtest
// lacks (the Deployment and Job controllers, relay workers) is played by the tests.
package gitops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/controller"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
)

// repoRoot is the root module, where the CRDs, the envtest binaries and config/argocd are.
var repoRoot = filepath.Join("..", "..")

var (
	pgSrv  *pgtest.Server
	kube   client.Client
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	// GITOPS_DEBUG_LOG=1 shows the operator's debug log (V(1)) on stderr.
	if os.Getenv("GITOPS_DEBUG_LOG") != "" {
		logf.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.Level(-1))))
	} else {
		logf.SetLogger(logr.Discard())
	}
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fail(err)
	}
	if err := outboxv1.AddToScheme(scheme); err != nil {
		return fail(err)
	}
	var err error
	if pgSrv, err = pgtest.Start(pgtest.Options{}); err != nil {
		return fail(err)
	}
	defer pgSrv.Stop() //nolint:errcheck // test teardown
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: filepath.Join(repoRoot, "bin", "k8s"),
	}
	cfg, err := env.Start()
	if err != nil {
		return fail(fmt.Errorf("envtest: %w", err))
	}
	defer env.Stop() //nolint:errcheck // test teardown
	if kube, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := startOperator(ctx, env); err != nil {
		return fail(err)
	}
	return m.Run()
}

// startOperator runs the three reconcilers in a manager set up like cmd/manager's.
func startOperator(ctx context.Context, env *envtest.Environment) error {
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{ByObject: controller.CacheByObject()},
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: controller.NeverCached()}},
		Controller:             config.Controller{SkipNameValidation: ptr(true)},
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	pools := outboxstats.NewPools()
	if err := controller.SetupAll(ctx, mgr, "outbox-relayworker:test", pools); err != nil {
		return err
	}
	go func() {
		defer pools.Close()
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return nil
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, err)
	return 1
}

func ptr[T any](v T) *T { return &v }
