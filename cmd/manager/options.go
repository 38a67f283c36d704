package main

import (
	"flag"
	"fmt"
	"os"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/outbox-operator/outbox-operator/internal/controller"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
)

// options are the manager's flags (docs/operations.md), checked.
type options struct {
	metricsAddr, probeAddr, pprofAddr string
	relayImage, leaderNS              string
	leaderElect                       bool
	namespaces                        []string
	dbMaxConns, maxReconciles         int
	kubeQPS                           float64
	kubeBurst                         int
	zap                               zap.Options
}

// parseOptions binds the flags into fs, parses args and refuses values the manager
// cannot run with, each with the flag's name.
func parseOptions(fs *flag.FlagSet, args []string) (options, error) {
	var o options
	var watchNS string
	defImage := os.Getenv("RELAY_IMAGE")
	if defImage == "" {
		defImage = controller.DefaultRelayImage
	}
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint (\"0\" disables it)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "address of Go's /debug/pprof endpoints, for profiling (\"0\", the default, disables them)")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader so only one replica reconciles")
	fs.StringVar(&o.leaderNS, "leader-election-namespace", "", "namespace of the leader-election Lease (default: the pod's namespace)")
	fs.StringVar(&watchNS, "watch-namespaces", "", "comma-separated namespaces whose resources the manager reconciles (default: all)")
	fs.StringVar(&o.relayImage, "relay-image", defImage, "default relay worker image (env RELAY_IMAGE); an OutboxPipeline's spec.image overrides it")
	fs.IntVar(&o.dbMaxConns, "database-max-connections", outboxstats.DefaultMaxConns,
		"connections the manager opens to one database at most, shared by every pipeline, replay and retention policy on it (at least 1)")
	fs.Float64Var(&o.kubeQPS, "kube-api-qps", 0,
		"API requests per second the manager sends at most; 0 (the default) sets no client-side limit and leaves the pacing to the API server's priority and fairness")
	fs.IntVar(&o.kubeBurst, "kube-api-burst", 0, "API requests the manager may send at once above --kube-api-qps (0: twice --kube-api-qps)")
	fs.IntVar(&o.maxReconciles, "max-concurrent-reconciles", controller.DefaultMaxConcurrentReconciles,
		"OutboxPipelines reconciled at the same time (at least 1)")
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.dbMaxConns < 1 {
		return o, fmt.Errorf("--database-max-connections=%d: must be at least 1", o.dbMaxConns)
	}
	if o.maxReconciles < 1 {
		return o, fmt.Errorf("--max-concurrent-reconciles=%d: must be at least 1", o.maxReconciles)
	}
	namespaces, err := parseWatchNamespaces(watchNS)
	if err != nil {
		return o, err
	}
	o.namespaces = namespaces
	return o, nil
}
