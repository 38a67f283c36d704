// Command bench-operator measures what a platform team sees with many pipelines on one
// operator (make bench-operator): a real kube-apiserver + etcd (envtest) with the
// CRDs, a private PostgreSQL, and the manager binary as its own process with the flags
// its pod gets (config/manager), leader election on, logged in as a user bound to the
// config/rbac roles. N OutboxPipelines over 10 namespaces share one database, each with
// its own outbox table and DSN Secret. There is no kubelet: the Deployments never get
// pods, and the status is what the manager reads from the tables.
//
// For each N (50 and 500 by default, same workload) it prints one table: the time
// until every pipeline is reconciled, the manager's API requests at steady state (the
// kube-apiserver's apiserver_request_total, minus the benchmark's own requests and the
// API server's own background), the manager's CPU and RSS, the control plane's CPU,
// the database connections, how long a 50-row insert takes to show in a status, and
// how long a rotated password takes to be used. docs/operations.md explains how to
// read it.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

var (
	sizes            = flag.String("pipelines", "50,500", "comma-separated numbers of pipelines, one run each")
	namespaces       = flag.Int("namespaces", 10, "namespaces the pipelines are spread over")
	idle             = flag.Duration("idle", 60*time.Second, "the steady-state window, nothing changing")
	background       = flag.Duration("background", 20*time.Second, "the window before the manager starts that measures the API server's own requests")
	statusInterval   = flag.Duration("status-interval", 15*time.Second, "spec.monitoring.statusInterval of every pipeline")
	reconcileTimeout = flag.Duration("reconcile-timeout", 4*time.Minute, "how long to wait for every pipeline to be reconciled before the rest is measured anyway")
	profile          = flag.String("profile", "", "directory for the manager's CPU profiles (reconcile and idle) and heap profile, via --pprof-bind-address")
	managerBin       = flag.String("manager-bin", "", "a manager binary to measure instead of building ./cmd/manager (e.g. another version)")
	managerArgs      = flag.String("manager-args", "", "extra manager flags, space separated, after the pod's (e.g. --max-concurrent-reconciles=8)")
	logs             = flag.String("logs", "", "directory to keep each run's manager log in (manager-<N>.log)")
	verbose          = flag.Bool("v", false, "print every request kind of the startup and steady-state windows, and the manager's own counters")
)

func main() {
	flag.Parse()
	// envtest logs through controller-runtime; the benchmark prints only its table.
	logf.SetLogger(logr.Discard())
	if err := benchmark(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-operator:", err)
		os.Exit(1)
	}
}

func benchmark() error {
	ns, err := parseSizes(*sizes)
	if err != nil {
		return err
	}
	if *namespaces < 1 || *idle < 10*time.Second || *background < 5*time.Second || *statusInterval < time.Second {
		return fmt.Errorf("-namespaces %d / -idle %s / -background %s / -status-interval %s: want at least 1, 10s, 5s and 1s",
			*namespaces, *idle, *background, *statusInterval)
	}
	for _, dir := range []string{*profile, *logs} {
		if dir == "" {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	bin, cleanup, err := buildManager(*managerBin)
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Printf("workload: N OutboxPipelines over %d namespaces, all on one PostgreSQL database, each its own outbox table\n"+
		"and DSN Secret, statusInterval %s, 1 relay replica each (no kubelet: no pods); one manager process with\n"+
		"config/manager's flags, leader election on, as a user bound to config/rbac's roles; %s steady-state window.\n\n",
		*namespaces, *statusInterval, *idle)
	var results []*result
	for _, n := range ns {
		fmt.Printf("N=%d: running...\n", n)
		r, err := runSize(bin, n)
		if err != nil {
			return fmt.Errorf("N=%d: %w", n, err)
		}
		results = append(results, r)
		if *verbose {
			r.printDetails()
		}
	}
	fmt.Println()
	printTable(results)
	return nil
}

func parseSizes(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 {
			return nil, fmt.Errorf("-pipelines: %q is not a number of at least 2 (one pipeline is the password probe's own)", f)
		}
		out = append(out, n)
	}
	return out, nil
}
