// run.go: one run at N pipelines, on a control plane, database and manager of its
// own: the API server's background, the manager's start, the creation of the
// pipelines until all are reconciled, a settle, the steady-state window, then the
// two probes (a 50-row insert, a rotated password).

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/localstack"
	"github.com/outbox-operator/outbox-operator/internal/testenv/procstat"
)

// result is what one run measured.
type result struct {
	n                 int
	reconciled        int
	reconcileTime     time.Duration // 0 when not all were reconciled within the timeout
	startup           counts        // the manager's requests from creation until all reconciled
	startupAPF        float64
	startupCounters   map[string]float64 // the manager's own metrics then
	background        counts             // the API server's own requests per second, no manager
	steady            counts             // the manager's requests per second, nothing changing
	steadyAPF         float64
	steadyCounters    map[string]float64
	cpu               cpuShares
	rssBytes, peakRSS int64
	dbConns           int // most seen in the steady window
	rowDelay          time.Duration
	rotation          rotationResult
}

// stack is one run's components.
type stack struct {
	root, dir string
	cl        *cluster
	db        *database
	mgr       *manager
}

func (s *stack) close(n int) {
	s.mgr.stop()
	if s.mgr != nil && *logs != "" {
		if b, err := os.ReadFile(s.mgr.log); err == nil {
			_ = os.WriteFile(filepath.Join(*logs, fmt.Sprintf("manager-%d.log", n)), b, 0o644)
		}
	}
	if s.cl != nil {
		s.cl.stop()
	}
	if s.db != nil {
		s.db.stop()
	}
	os.RemoveAll(s.dir)
}

func runSize(bin string, n int) (*result, error) {
	ctx := context.Background()
	s := &stack{}
	defer s.close(n)
	var err error
	if s.root, err = localstack.ModuleRoot(); err != nil {
		return nil, err
	}
	if s.dir, err = os.MkdirTemp("", "bench-operator-"); err != nil {
		return nil, err
	}
	rs := refs(n)
	if s.db, err = startDatabase(); err != nil {
		return nil, err
	}
	if err := s.db.migrate(ctx, tablesOf(rs)); err != nil {
		return nil, err
	}
	if s.cl, err = startCluster(s.root, s.dir); err != nil {
		return nil, err
	}
	if err := createNamespaces(ctx, s.cl.admin); err != nil {
		return nil, err
	}
	r := &result{n: n}
	if r.background, err = s.backgroundRates(ctx); err != nil {
		return nil, err
	}
	if s.mgr, err = startManager(bin, s.root, s.dir, s.cl.kubeconfig); err != nil {
		return nil, err
	}
	if err := s.mgr.waitLeader(ctx, s.cl.admin); err != nil {
		return nil, err
	}
	if err := s.reconcileAll(ctx, r, rs); err != nil {
		return nil, err
	}
	// Let the second pass of every pipeline and the Events of the first go by.
	time.Sleep(*statusInterval + 5*time.Second)
	if err := s.steadyState(ctx, r); err != nil {
		return nil, err
	}
	if r.rowDelay, err = s.rowProbe(ctx); err != nil {
		return nil, err
	}
	if r.rotation, err = s.rotationProbe(ctx); err != nil {
		return nil, err
	}
	return r, s.mgr.exited()
}

// window measures what the API server served between two scrapes, less the
// benchmark's own requests in between.
type window struct {
	cl      *cluster
	a       apiSnapshot
	ownFrom counts
}

func (s *stack) openWindow(ctx context.Context) (*window, error) {
	w := &window{cl: s.cl, ownFrom: s.cl.own.snapshot()}
	var err error
	w.a, err = s.cl.scrapeAPI(ctx)
	return w, err
}

// close returns the requests by kind (less the benchmark's), the manager's APF
// count, and the window's length.
func (w *window) close(ctx context.Context) (counts, float64, time.Duration, error) {
	own := w.cl.own.snapshot().minus(w.ownFrom)
	b, err := w.cl.scrapeAPI(ctx)
	if err != nil {
		return nil, 0, 0, err
	}
	return b.requests.minus(w.a.requests).minus(own), b.managerAPF - w.a.managerAPF, b.at.Sub(w.a.at), nil
}

// backgroundRates are the API server's own requests per second before the manager
// runs (its leases, endpoint reconciler, ...), to be subtracted from what follows.
func (s *stack) backgroundRates(ctx context.Context) (counts, error) {
	w, err := s.openWindow(ctx)
	if err != nil {
		return nil, err
	}
	time.Sleep(*background)
	c, _, d, err := w.close(ctx)
	if err != nil {
		return nil, err
	}
	return c.scaled(1 / d.Seconds()), nil
}

// reconcileAll creates the pipelines and waits until every one is reconciled.
func (s *stack) reconcileAll(ctx context.Context, r *result, rs []pipelineRef) error {
	appDSN, rotDSN := s.db.dsn(appRole, "app-password-1"), s.db.dsn(rotRole, "rot-password-1")
	dsnOf := func(p pipelineRef) string {
		if p == rotProbe {
			return rotDSN
		}
		return appDSN
	}
	w, err := s.openWindow(ctx)
	if err != nil {
		return err
	}
	stopProfile := s.profileCPU(fmt.Sprintf("cpu-reconcile-%d.pprof", r.n), 30*time.Second)
	start := time.Now()
	if err := createPipelines(ctx, s.cl.admin, rs, dsnOf); err != nil {
		return err
	}
	r.reconciled, r.reconcileTime, err = waitReconciled(ctx, s.cl.admin, s.mgr, r.n, start, *reconcileTimeout)
	if err != nil {
		return err
	}
	c, apf, d, err := w.close(ctx)
	if err != nil {
		return err
	}
	r.startup, r.startupAPF = c.minus(r.background.scaled(d.Seconds())), apf
	r.startupCounters, err = s.mgr.counters(ctx)
	// The profile covers a fixed 30 s, which may end after the window.
	stopProfile()
	return err
}

// steadyState measures the idle window: requests, CPU, memory, connections.
func (s *stack) steadyState(ctx context.Context, r *result) error {
	w, err := s.openWindow(ctx)
	if err != nil {
		return err
	}
	stopProfile := s.profileCPU(fmt.Sprintf("cpu-idle-%d.pprof", r.n), *idle-5*time.Second)
	cpu0 := s.sampleCPU()
	t0 := time.Now()
	for time.Since(t0) < *idle {
		time.Sleep(5 * time.Second)
		if err := s.mgr.exited(); err != nil {
			return err
		}
		n, err := s.db.operatorConnections(ctx)
		if err != nil {
			return err
		}
		r.dbConns = max(r.dbConns, n)
	}
	r.cpu = s.sampleCPU().since(cpu0, time.Since(t0))
	stopProfile()
	c, apf, d, err := w.close(ctx)
	if err != nil {
		return err
	}
	r.steady = c.scaled(1 / d.Seconds()).minus(r.background)
	r.steadyAPF = apf / d.Seconds()
	st, err := procstat.Read(s.mgr.pid())
	if err != nil {
		return err
	}
	r.rssBytes = st.RSSBytes
	if r.peakRSS, err = procstat.PeakRSS(s.mgr.pid()); err != nil {
		return err
	}
	if r.steadyCounters, err = s.mgr.counters(ctx); err != nil {
		return err
	}
	s.profileHeap(fmt.Sprintf("heap-%d.pprof", r.n))
	return nil
}

// cpuSample is CPU seconds of the manager, the kube-apiserver and etcd.
type cpuSample struct{ manager, apiserver, etcd float64 }

// cpuShares are percentages of one core over a window.
type cpuShares cpuSample

func (s *stack) sampleCPU() cpuSample {
	var out cpuSample
	self := os.Getpid()
	for _, p := range procstat.All() {
		switch {
		case p.PID == s.mgr.pid():
			out.manager = p.CPUSeconds
		case p.PPID == self && p.Comm == "kube-apiserver":
			out.apiserver += p.CPUSeconds
		case p.PPID == self && p.Comm == "etcd":
			out.etcd += p.CPUSeconds
		}
	}
	return out
}

func (a cpuSample) since(b cpuSample, d time.Duration) cpuShares {
	pct := func(x, y float64) float64 { return 100 * (x - y) / d.Seconds() }
	return cpuShares{pct(a.manager, b.manager), pct(a.apiserver, b.apiserver), pct(a.etcd, b.etcd)}
}

func (s *stack) profilePath(name string) string { return filepath.Join(*profile, name) }
