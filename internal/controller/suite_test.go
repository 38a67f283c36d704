package controller

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"sigs.k8s.io/yaml"

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
	// managerCfg is the suite manager's: its ServiceAccount, counted by apiRequests.
	managerCfg *rest.Config
	// suiteCache is the suite manager's cache, with the controllers' indexes.
	suiteCache cache.Cache
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
	pgSrv, err = pgtest.Start(pgtest.Options{Settings: pgtest.LogicalReplication, Logf: func(f string, a ...any) { GinkgoWriter.Printf(f+"\n", a...) }})
	Expect(err).NotTo(HaveOccurred())

	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(outboxv1.AddToScheme(scheme)).To(Succeed())

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		// KUBEBUILDER_ASSETS (set by the Makefile) wins; plain `go test ./internal/controller`
		// finds the binaries `make envtest` built.
		BinaryAssetsDirectory: filepath.Join("..", "..", "bin", "k8s"),
	}
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())

	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	// The manager runs as a ServiceAccount bound to the generated ClusterRole
	// (config/rbac/role.yaml), so every spec also proves the RBAC markers suffice
	// (Secrets: get, and list and watch for the metadata watch).
	managerCfg = managerConfigWithGeneratedRBAC()
	mgr, err := ctrl.NewManager(managerCfg, managerOptions())
	suiteCache = mgr.GetCache()
	Expect(err).NotTo(HaveOccurred())
	pools = outboxstats.NewPools()
	Expect(SetupAll(suiteCtx, mgr, "outbox-relayworker:test", pools, WithSlotReplacedFor(testSlotReplacedFor))).To(Succeed())

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

// managerOptions are the production manager's (cmd/manager), without the endpoints.
func managerOptions() ctrl.Options {
	return ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{ByObject: CacheByObject()},
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: NeverCached()}},
		Controller:             config.Controller{SkipNameValidation: ptrTo(true)},
	}
}

func managerConfigWithGeneratedRBAC() *rest.Config {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var role rbacv1.ClusterRole
	Expect(yaml.Unmarshal(b, &role)).To(Succeed())
	role.Name = "outbox-operator-manager-role-under-test"
	Expect(k8sClient.Create(suiteCtx, &role)).To(Succeed())
	Expect(k8sClient.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "outbox-system"}})).To(Succeed())
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "outbox-system", Name: "controller-manager"}}
	Expect(k8sClient.Create(suiteCtx, sa)).To(Succeed())
	Expect(k8sClient.Create(suiteCtx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: sa.Namespace, Name: sa.Name}},
	})).To(Succeed())
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:outbox-system:controller-manager"}
	c.Wrap(apiRequests.wrap)
	return c
}

// openDB opens a test database handle.
func openDB(dsn string) *sql.DB {
	db, err := sql.Open("postgres", dsn)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(db.Close)
	return db
}
