/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

// Command manager runs the outbox-operator: the OutboxPipeline, DeadLetterReplay and
// RetentionPolicy controllers, with leader election, metrics and health endpoints.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/buildinfo"
	"github.com/outbox-operator/outbox-operator/internal/controller"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}

func run() error {
	var metricsAddr, probeAddr, relayImage, leaderNS, watchNS string
	var leaderElect bool
	var dbMaxConns int
	defImage := os.Getenv("RELAY_IMAGE")
	if defImage == "" {
		defImage = controller.DefaultRelayImage
	}
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint (\"0\" disables it)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader so only one replica reconciles")
	flag.StringVar(&leaderNS, "leader-election-namespace", "", "namespace of the leader-election Lease (default: the pod's namespace)")
	flag.StringVar(&watchNS, "watch-namespaces", "", "comma-separated namespaces whose resources the manager reconciles (default: all)")
	flag.StringVar(&relayImage, "relay-image", defImage, "default relay worker image (env RELAY_IMAGE); an OutboxPipeline's spec.image overrides it")
	flag.IntVar(&dbMaxConns, "database-max-connections", outboxstats.DefaultMaxConns,
		"connections the manager opens to one database at most, shared by every pipeline, replay and retention policy on it (at least 1)")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	if dbMaxConns < 1 {
		return fmt.Errorf("--database-max-connections=%d: must be at least 1", dbMaxConns)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")
	namespaces, err := parseWatchNamespaces(watchNS)
	if err != nil {
		return err
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(outboxv1.AddToScheme(scheme))

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "outbox-operator.outbox.dev",
		LeaderElectionNamespace: leaderNS,
		// Safe because the manager exits right after Start returns.
		LeaderElectionReleaseOnCancel: true,
		// Owned kinds are cached only when labelled managed-by=outbox-operator; of
		// Secrets only the identity is (a metadata watch), their data is read one by
		// one in the referencing namespace when it changed.
		Cache:  cacheOptions(namespaces),
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: controller.NeverCached()}},
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	pools := outboxstats.NewPoolsMax(dbMaxConns)
	defer pools.Close()
	if err := controller.SetupAll(ctx, mgr, relayImage, pools); err != nil {
		return err
	}
	// Replay and retention outcomes, read from the cache at scrape time (docs/monitoring.md).
	metrics.Registry.MustRegister(controller.NewResourceCollector(mgr.GetCache()))
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add healthz: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("add readyz: %w", err)
	}
	log.Info("starting manager", "version", buildinfo.Version(), "relayImage", relayImage, "leaderElection", leaderElect, "watchNamespaces", namespaces,
		"databaseMaxConnections", dbMaxConns)
	return mgr.Start(ctx)
}

// cacheOptions limits every informer to the watched namespaces (parseWatchNamespaces;
// none is every namespace): a manager installed for some namespaces then neither lists
// nor watches the rest of the cluster (its RBAC may still be cluster-wide).
func cacheOptions(namespaces []string) cache.Options {
	opts := cache.Options{ByObject: controller.CacheByObject()}
	for _, ns := range namespaces {
		if opts.DefaultNamespaces == nil {
			opts.DefaultNamespaces = map[string]cache.Config{}
		}
		opts.DefaultNamespaces[ns] = cache.Config{}
	}
	return opts
}
