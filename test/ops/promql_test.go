package ops

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

const (
	rulesFile     = "config/prometheus/prometheusrule.yaml"
	dashboardFile = "config/grafana/outbox-pipelines.json"
	runbookPrefix = "https://github.com/outbox-operator/outbox-operator/blob/main/docs/operations.md#"
)

var promQL = parser.NewParser(parser.Options{})

func loadRule(t *testing.T) *monitoringv1.PrometheusRule {
	t.Helper()
	var pr monitoringv1.PrometheusRule
	if err := yaml.UnmarshalStrict(readFile(t, repo(rulesFile)), &pr); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return &pr
}

// alerts are the alerting rules of config/prometheus, in file order.
func alerts(t *testing.T) []monitoringv1.Rule {
	t.Helper()
	var out []monitoringv1.Rule
	for _, g := range loadRule(t).Spec.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatalf("%s has no rules", rulesFile)
	}
	return out
}

// metricNames parses a PromQL expression and returns the metric names it selects.
func metricNames(expr string) ([]string, error) {
	e, err := promQL.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var bad error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			bad = fmt.Errorf("selector %s names no metric", vs)
		}
		names = append(names, name)
		return nil
	})
	return names, bad
}

// The rules file is what `promtool check rules` accepts: the spec's groups parse,
// every expression is valid PromQL, and every annotation template parses.
func TestRulesPassPromtoolChecks(t *testing.T) {
	spec, err := yaml.Marshal(loadRule(t).Spec)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, promQL, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("%s: %v", rulesFile, err)
	}
	if groups != nil && len(groups.Groups) == 0 {
		t.Errorf("%s: no groups", rulesFile)
	}
}

// Each alert tells the on-call what happened and where to look.
func TestAlertsHaveSeveritySummaryDescriptionAndRunbook(t *testing.T) {
	anchors := headingAnchors(t, "docs/operations.md")
	seen := map[string]bool{}
	for _, r := range alerts(t) {
		if r.Alert == "" {
			t.Errorf("rule %q is not an alert; this file holds alerts only", r.Record)
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s is defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if sev := r.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, sev) {
			t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, sev)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		url := r.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(url, runbookPrefix)
		if !ok || !anchors[anchor] {
			t.Errorf("%s: runbook_url %s is not a section of docs/operations.md (%s<anchor>)", r.Alert, url, runbookPrefix)
		}
	}
}

// The alerts the monitoring issue asks for exist, each on the metric that measures it.
func TestAlertsCoverTheFailureModes(t *testing.T) {
	byMetric := map[string][]string{}
	for _, r := range alerts(t) {
		names, err := metricNames(r.Expr.String())
		if err != nil {
			t.Fatalf("%s: %v", r.Alert, err)
		}
		for _, n := range names {
			byMetric[n] = append(byMetric[n], r.Alert)
		}
	}
	for _, m := range []string{
		"outbox_oldest_pending_age_seconds", // oldest pending age too high
		"outbox_send_dead_total",            // DEAD growth
		"outbox_lease_expired_total",        // lease expiries rising
		"outbox_send_unknown_total",         // unknown send outcomes
		"outbox_mark_fenced_total",          // fenced marks
		"outbox_pipeline_workers_ready",     // no ready workers
		"outbox_broker_up",                  // broker unavailable
		"outbox_pipeline_database_reachable",
		"outbox_replay_failed",                       // a failed replay
		"outbox_retention_last_run_failed",           // a failed retention run
		"inbox_consume_dead_total",                   // consumers park messages
		"inbox_oldest_message_age_seconds",           // consumers lag
		"inbox_oldest_unhandled_message_age_seconds", // a consumer is stuck
	} {
		if len(byMetric[m]) == 0 {
			t.Errorf("no alert uses %s", m)
		}
	}
}

// grafanaVar matches Grafana's template variables; the built-in intervals become a
// duration and the others a plain string, which is what Grafana substitutes.
var (
	grafanaInterval = regexp.MustCompile(`\$\{?__(rate_interval|interval|range)\}?`)
	grafanaVar      = regexp.MustCompile(`\$\{?[A-Za-z_]\w*(:\w+)?\}?`)
	labelValues     = regexp.MustCompile(`^\s*label_values\((.*),\s*\w+\s*\)\s*$`)
)

func expandGrafana(q string) string {
	return grafanaVar.ReplaceAllString(grafanaInterval.ReplaceAllString(q, "5m"), "x")
}

type dashboard struct {
	Title      string           `json:"title"`
	UID        string           `json:"uid"`
	Panels     []dashboardPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type dashboardPanel struct {
	Type    string           `json:"type"`
	Title   string           `json:"title"`
	Panels  []dashboardPanel `json:"panels"` // a collapsed row's
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(readFile(t, repo(dashboardFile)), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// dashboardQueries are every PromQL query of the dashboard, by where it is.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	d := loadDashboard(t)
	out := map[string]string{}
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for i, tg := range p.Targets {
				out[fmt.Sprintf("panel %q query %d", p.Title, i)] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		if m := labelValues.FindStringSubmatch(q); m != nil {
			q = m[1]
		}
		out[fmt.Sprintf("variable %s", v.Name)] = q
	}
	return out
}

func TestDashboardQueriesParse(t *testing.T) {
	qs := dashboardQueries(t)
	if len(qs) < 10 {
		t.Fatalf("only %d queries in %s", len(qs), dashboardFile)
	}
	for where, q := range qs {
		if _, err := metricNames(expandGrafana(q)); err != nil {
			t.Errorf("%s: %q: %v", where, q, err)
		}
		// Every panel follows the pipeline (and namespace) variables.
		if strings.HasPrefix(where, "panel") && !strings.Contains(q, `pipeline=~"$pipeline"`) {
			t.Errorf("%s ignores the pipeline variable: %s", where, q)
		}
	}
	d := loadDashboard(t)
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	for _, want := range []string{"datasource", "namespace", "pipeline"} {
		if !slices.Contains(vars, want) {
			t.Errorf("dashboard has no %s variable (has %v)", want, vars)
		}
	}
	if d.UID == "" || d.Title == "" {
		t.Error("dashboard needs a uid and a title for import and links")
	}
}

// usedMetrics are the metric names the rules and the dashboard query, with where.
func usedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	for _, r := range alerts(t) {
		names, err := metricNames(r.Expr.String())
		if err != nil {
			t.Fatalf("alert %s: %v", r.Alert, err)
		}
		for _, n := range names {
			used[n] = append(used[n], "alert "+r.Alert)
		}
	}
	for where, q := range dashboardQueries(t) {
		names, err := metricNames(expandGrafana(q))
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		for _, n := range names {
			used[n] = append(used[n], where)
		}
	}
	return used
}

// headingAnchors are the GitHub anchors of a Markdown file's headings.
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, line := range strings.Split(string(readFile(t, repo(path))), "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			out[githubAnchor(strings.TrimLeft(h, "#"))] = true
		}
	}
	return out
}

// githubAnchor is GitHub's slug of a heading: lower case, punctuation dropped,
// spaces to hyphens.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// docs/monitoring.md lists every alert and every manager metric.
func TestMonitoringDocListsAlertsAndManagerMetrics(t *testing.T) {
	doc := string(readFile(t, repo("docs", "monitoring.md")))
	for _, r := range alerts(t) {
		if !strings.Contains(doc, "`"+r.Alert+"`") {
			t.Errorf("docs/monitoring.md does not list alert %s", r.Alert)
		}
	}
	var missing []string
	for name := range usedMetrics(t) {
		if strings.HasPrefix(name, "outbox_pipeline_") || name == "outbox_replay_failed" || name == "outbox_retention_last_run_failed" {
			if !strings.Contains(doc, "`"+name+"`") {
				missing = append(missing, name)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/monitoring.md does not document manager metrics %v", missing)
	}
}

// The links between the runbook and this doc land on real sections.
func TestRunbookLinksResolve(t *testing.T) {
	ops := headingAnchors(t, "docs/operations.md")
	link := regexp.MustCompile(`\]\((operations\.md)?#([^)\s]+)\)`)
	for _, file := range []string{"docs/monitoring.md", "docs/operations.md"} {
		own := headingAnchors(t, file)
		for _, m := range link.FindAllStringSubmatch(string(readFile(t, repo(file))), -1) {
			target := own
			if m[1] != "" || file == "docs/operations.md" {
				target = ops
			}
			if !target[m[2]] {
				t.Errorf("%s links to %s#%s, which is no heading there", file, m[1], m[2])
			}
		}
	}
}
