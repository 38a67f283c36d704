package controllers

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
	"github.com/outbox-operator/outbox-operator/internal/testenv/pgtest"
)

var (
	cfg       *rest.Config
	k8sClient client.Client
	testEnv   *envtest.Environment
	pgSrv     *pgtest.Server
	scheme    = runtime.NewScheme()
	suiteCtx  context.Context
	cancel    context.CancelFunc
	pools     *outboxstats.Pools
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controllers Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	suiteCtx, cancel = context.WithCancel(context.Background())
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)

	var err error
	pgSrv, err = pgtest.Start(pgtest.Options{Logf: func(f string, a ...any) { GinkgoWriter.Printf(f+"\n", a...) }})
	Expect(err).NotTo(HaveOccurred())

	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(outboxv1.AddToScheme(scheme)).To(Succeed())

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())

	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{ByObject: CacheByObject()},
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: NeverCached()}},
		Controller:             config.Controller{SkipNameValidation: ptrTo(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	pools = outboxstats.NewPools()
	Expect(SetupAll(suiteCtx, mgr, "outbox-relayworker:test", pools)).To(Succeed())

	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(suiteCtx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
	if pools != nil {
		pools.Close()
	}
	if pgSrv != nil {
		Expect(pgSrv.Stop()).To(Succeed())
	}
})

func ptrTo[T any](v T) *T { return &v }

// openDB opens a test database handle.
func openDB(dsn string) *sql.DB {
	db, err := sql.Open("postgres", dsn)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(db.Close)
	return db
}
