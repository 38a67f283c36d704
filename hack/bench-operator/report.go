// report.go: the table (a row a measure, its target, a column per N, and the cost of
// one more pipeline between the smallest and the largest N) and the details (-v).

package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// row is one measure; num, when set, is the number the per-pipeline column divides.
type row struct {
	name, target string
	cell         func(*result) string
	num          func(*result) float64
	perFmt       string
}

func rows() []row {
	twice := 2 * *statusInterval
	return []row{
		{name: "pipelines reconciled (Deployment + status read)", target: "all, within 60 s", cell: reconciledCell,
			num: func(r *result) float64 { return r.reconcileTime.Seconds() * 1000 }, perFmt: "%+.0f ms"},
		{name: "  manager API writes until then, per pipeline", target: "a handful",
			cell: func(r *result) string { return fmt.Sprintf("%.1f", r.startup.sum(isWrite)/float64(r.n)) }},
		{name: "  manager API reads until then, per pipeline", target: "",
			cell: func(r *result) string { return fmt.Sprintf("%.1f", r.startup.sum(isRead)/float64(r.n)) }},
		{name: "steady state: manager API writes/s", target: "<= 1", cell: rate(isWrite), num: sum(isWrite), perFmt: "%+.4f/s"},
		{name: "steady state: manager API reads/s", target: "<= 2", cell: rate(isRead), num: sum(isRead), perFmt: "%+.4f/s"},
		{name: "  of which Secret GETs/s", target: "none while nothing changes", cell: rate(isSecretGet), num: sum(isSecretGet), perFmt: "%+.4f/s"},
		{name: "  manager's requests/s as APF dispatched them", target: "(cross-check)",
			cell: func(r *result) string { return apfCell(r.steadyAPF) }},
		{name: "  API server's own requests/s (subtracted)", target: "",
			cell: func(r *result) string {
				return fmt.Sprintf("%.2f", r.background.sum(func(requestKey) bool { return true }))
			}},
		{name: "manager CPU, % of a core", target: "<= 10 %", cell: pct(func(r *result) float64 { return r.cpu.manager }),
			num: func(r *result) float64 { return r.cpu.manager }, perFmt: "%+.4f %%"},
		{name: "manager RSS now / peak, MiB", target: "<= 250", cell: func(r *result) string {
			return fmt.Sprintf("%.0f / %.0f", mib(r.rssBytes), mib(r.peakRSS))
		}, num: func(r *result) float64 { return mib(r.peakRSS) * 1024 }, perFmt: "%+.0f KiB"},
		{name: "kube-apiserver CPU idle, % of a core", target: "a few %", cell: pct(func(r *result) float64 { return r.cpu.apiserver })},
		{name: "etcd CPU idle, % of a core", target: "a few %", cell: pct(func(r *result) float64 { return r.cpu.etcd })},
		{name: "database connections of the operator (most seen)", target: "<= 5",
			cell: func(r *result) string { return fmt.Sprint(r.dbConns) }},
		{name: fmt.Sprintf("%d-row insert shown in status", probeRows), target: fmt.Sprintf("<= %s (2 x statusInterval)", twice),
			cell: func(r *result) string { return delayCell(r.rowDelay, 3**statusInterval) }},
		{name: "rotated password used after the Secret update", target: "<= 30s", cell: rotationCell},
	}
}

func isSecretGet(k requestKey) bool { return k.verb == "GET" && k.resource == "secrets" }

func rate(keep func(requestKey) bool) func(*result) string {
	return func(r *result) string { return fmt.Sprintf("%.2f", r.steady.sum(keep)) }
}

func sum(keep func(requestKey) bool) func(*result) float64 {
	return func(r *result) float64 { return r.steady.sum(keep) }
}

func pct(f func(*result) float64) func(*result) string {
	return func(r *result) string { return fmt.Sprintf("%.1f %%", f(r)) }
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func reconciledCell(r *result) string {
	if r.reconcileTime == 0 {
		return fmt.Sprintf("%d/%d after %s", r.reconciled, r.n, *reconcileTimeout)
	}
	return fmt.Sprintf("%d/%d in %.1f s", r.reconciled, r.n, r.reconcileTime.Seconds())
}

func apfCell(v float64) string {
	if v < 0 {
		return "n/a (no APF)"
	}
	return fmt.Sprintf("%.2f", v)
}

func delayCell(d, waited time.Duration) string {
	if d == 0 {
		return "not within " + waited.String()
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func rotationCell(r *result) string {
	s := delayCell(r.rotation.delay, 60*time.Second+2**statusInterval)
	if !r.rotation.oldFailed {
		s += " (the old password was never seen failing)"
	}
	return s
}

func printTable(rs []*result) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	head := []string{"measure", "target"}
	for _, r := range rs {
		head = append(head, fmt.Sprintf("N=%d", r.n))
	}
	if len(rs) > 1 {
		head = append(head, fmt.Sprintf("per pipeline (N=%d vs %d)", rs[len(rs)-1].n, rs[0].n))
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, rw := range rows() {
		cells := []string{rw.name, rw.target}
		for _, r := range rs {
			cells = append(cells, rw.cell(r))
		}
		if len(rs) > 1 {
			cells = append(cells, perPipeline(rw, rs[0], rs[len(rs)-1]))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
}

func perPipeline(rw row, a, b *result) string {
	if rw.num == nil || b.n == a.n || (rw.name == rows()[0].name && (a.reconcileTime == 0 || b.reconcileTime == 0)) {
		return ""
	}
	return fmt.Sprintf(rw.perFmt, (rw.num(b)-rw.num(a))/float64(b.n-a.n))
}

// printDetails prints the request kinds of both windows and the manager's counters.
func (r *result) printDetails() {
	fmt.Printf("  N=%d: the manager's requests from creation until all were reconciled (total; APF saw %.0f):\n", r.n, r.startupAPF)
	for _, k := range r.startup.sorted(0.5) {
		fmt.Printf("    %-42s %8.0f  (%.2f per pipeline)\n", k, r.startup[k], r.startup[k]/float64(r.n))
	}
	fmt.Printf("  N=%d: steady state, the manager's requests per second by kind:\n", r.n)
	for _, k := range r.steady.sorted(0.01) {
		fmt.Printf("    %-42s %8.3f/s\n", k, r.steady[k])
	}
	fmt.Printf("  N=%d: the API server's own requests per second (no manager):\n", r.n)
	for _, k := range r.background.sorted(0.01) {
		fmt.Printf("    %-42s %8.3f/s\n", k, r.background[k])
	}
	printCounters(fmt.Sprintf("N=%d: the manager's counters when all were reconciled", r.n), r.startupCounters)
	printCounters(fmt.Sprintf("N=%d: the manager's counters after the steady window", r.n), r.steadyCounters)
	fmt.Printf("  N=%d: password probe: old password seen failing (%s): %v\n", r.n, outboxv1.ReasonDatabaseUnreachable, r.rotation.oldFailed)
}

func printCounters(title string, c map[string]float64) {
	fmt.Printf("  %s:\n", title)
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("    %-80s %10.0f\n", k, c[k])
	}
}
