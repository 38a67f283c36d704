// profile.go: the manager's own view: its Go profiles (-profile, through
// --pprof-bind-address) and its controller metrics (reconciles by result, work queue
// retries, its API requests by method and code), which say where a slow reconcile
// waits.

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"
)

// profileCPU fetches a CPU profile of d in the background into the -profile
// directory; the returned func waits for it. Without -profile it does nothing.
func (s *stack) profileCPU(name string, d time.Duration) (wait func()) {
	if *profile == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", s.mgr.pprofAddr, int(d.Seconds()))
		if err := fetch(url, s.profilePath(name), d+30*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "bench-operator: profile:", err)
			return
		}
		printTop(s.profilePath(name))
	}()
	return func() { <-done }
}

func (s *stack) profileHeap(name string) {
	if *profile == "" {
		return
	}
	if err := fetch("http://"+s.mgr.pprofAddr+"/debug/pprof/heap", s.profilePath(name), 30*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "bench-operator: heap profile:", err)
	}
}

func fetch(url, path string, timeout time.Duration) error {
	hc := &http.Client{Timeout: timeout}
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// printTop prints the profile's heaviest functions (cumulative), as go tool pprof does.
func printTop(path string) {
	out, err := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=25", path).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench-operator: pprof %s: %v\n", path, err)
		return
	}
	fmt.Printf("  profile %s:\n%s\n", path, indent(string(out), "    "))
}

func indent(s, pre string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return pre + strings.Join(lines, "\n"+pre)
}

// managerMetrics are the manager's series the details print, by name.
var managerMetrics = []string{
	"controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total",
	"workqueue_retries_total", "workqueue_depth", "workqueue_adds_total", "rest_client_requests_total",
	"controller_runtime_max_concurrent_reconciles",
}

// counters scrapes the manager's /metrics: each series of managerMetrics (the
// OutboxPipeline controller's where the series names a controller) by its labels.
func (m *manager) counters(ctx context.Context) (map[string]float64, error) {
	fams, err := scrapeURL(ctx, http.DefaultClient, "http://"+m.metricsAddr+"/metrics")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, name := range managerMetrics {
		for _, s := range fams[name].GetMetric() {
			l := labels(s)
			if c := l["controller"] + l["name"]; c != "" && c != "outboxpipeline" {
				continue
			}
			delete(l, "controller")
			delete(l, "name")
			v := s.GetCounter().GetValue() + s.GetGauge().GetValue()
			out[name+labelString(l)] = v
		}
	}
	return out, nil
}

func labelString(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	var kv []string
	for k, v := range l {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return "{" + strings.Join(kv, ",") + "}"
}
