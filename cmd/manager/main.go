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
	"k8s.io/client-go/rest"
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
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	o, err := parseOptions(flag.CommandLine, args)
	if err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if err := applyRateLimit(cfg, o.kubeQPS, o.kubeBurst); err != nil {
		return err
	}
	mgr, err := newManager(cfg, o)
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	pools := outboxstats.NewPoolsMax(o.dbMaxConns)
	defer pools.Close()
	if err := controller.SetupAll(ctx, mgr, o.relayImage, pools, controller.WithMaxConcurrentReconciles(o.maxReconciles)); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting manager", "version", buildinfo.Version(), "relayImage", o.relayImage,
		"leaderElection", o.leaderElect, "watchNamespaces", o.namespaces, "databaseMaxConnections", o.dbMaxConns,
		"maxConcurrentReconciles", o.maxReconciles, "kubeAPIQPS", cfg.QPS, "kubeAPIBurst", cfg.Burst)
	return mgr.Start(ctx)
}

// newManager makes the manager with its endpoints, leader election, cache and health
// checks, and registers the resource collector.
func newManager(cfg *rest.Config, o options) (ctrl.Manager, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(outboxv1.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "outbox-operator.outbox.dev",
		LeaderElectionNamespace: o.leaderNS,
		// Safe because the manager exits right after Start returns.
		LeaderElectionReleaseOnCancel: true,
		// Owned kinds are cached only when labelled managed-by=outbox-operator; of
		// Secrets only the identity is (a metadata watch), their data is read one by
		// one in the referencing namespace when it changed.
		Cache:  cacheOptions(o.namespaces),
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: controller.NeverCached()}},
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	// Replay and retention outcomes, read from the cache at scrape time (docs/monitoring.md).
	metrics.Registry.MustRegister(controller.NewResourceCollector(mgr.GetCache()))
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add healthz: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add readyz: %w", err)
	}
	return mgr, nil
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
