package ops

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// The alert rules are evaluated the way Prometheus evaluates them: rules.AlertingRule
// over a promql.Engine with Prometheus' defaults (5 minute lookback), on synthetic
// series scraped every 30 s, evaluated every 30 s. Each scenario says which alerts
// must fire and when; every other alert of the file must stay silent.

const (
	scrapeEvery = 30 * time.Second
	// The series span an hour; rules are evaluated from evalFrom on, so every series
	// of the healthy base has 20 minutes of history (a Prometheus that has just started
	// sees every counter as new, which is not what these scenarios are about).
	seriesSpan = 60 * time.Minute
	evalFrom   = 20 * time.Minute
)

// loadSeries is a promqltest load block of the healthy series with changes applied.
func loadSeries(changes []series) string {
	var all []series
	for _, h := range healthy() {
		if i := slices.IndexFunc(changes, func(c series) bool { return c.key() == h.key() }); i < 0 {
			all = append(all, h)
		}
	}
	for _, c := range changes {
		if c.values != nil {
			all = append(all, c)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "load %s\n", model.Duration(scrapeEvery))
	for _, s := range all {
		fmt.Fprintf(&b, "  %s", s.key())
		for at := time.Duration(0); at <= seriesSpan; at += scrapeEvery {
			if v, ok := s.values(at.Minutes()); value.IsStaleNaN(v) {
				b.WriteString(" stale")
			} else if ok {
				fmt.Fprintf(&b, " %g", v)
			} else {
				b.WriteString(" _")
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// alertingRules turns a PrometheusRule's groups into Prometheus' own rule objects,
// through rulefmt as Prometheus loads a rule file.
func alertingRules(t *testing.T, where string, spec monitoringv1.PrometheusRuleSpec) []*rules.AlertingRule {
	t.Helper()
	b, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(b, false, model.UTF8Validation, promQL, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Fatalf("%s: %v", where, err)
	}
	var out []*rules.AlertingRule
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			expr, err := promQL.ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %s: %v", where, r.Alert, err)
			}
			out = append(out, rules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), time.Duration(r.KeepFiringFor),
				labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "", true, nil))
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no alerts", where)
	}
	return out
}

// fired is what an alert did over the evaluations of one scenario, by label set.
type fired struct {
	labels      labels.Labels
	first, last time.Duration
}

// evaluate runs every rule every scrapeEvery from evalFrom to the end of the series,
// except while Prometheus is down (minutes [down[0], down[1]) when down[1] > 0), and
// returns the alerts that reached firing.
func evaluate(t *testing.T, rs []*rules.AlertingRule, load string, down [2]float64) map[string][]*fired {
	t.Helper()
	st := promqltest.LoadedStorage(t, load)
	engine := promql.NewEngine(promql.EngineOpts{
		MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute, // Prometheus' defaults
		EnableAtModifier: true, EnableNegativeOffset: true, Parser: promQL,
	})
	t.Cleanup(func() { _ = engine.Close() })
	query := rules.EngineQueryFunc(engine, st)
	start := time.Unix(0, 0).UTC()
	out := map[string][]*fired{}
	for at := evalFrom; at <= seriesSpan; at += scrapeEvery {
		if m := at.Minutes(); m >= down[0] && m < down[1] {
			continue
		}
		for _, r := range rs {
			if _, err := r.Eval(context.Background(), 0, start.Add(at), query, nil, 0); err != nil {
				t.Fatalf("%s at %v: %v", r.Name(), at, err)
			}
			for _, a := range r.ActiveAlerts() {
				if a.State != rules.StateFiring {
					continue
				}
				f := findFired(out[r.Name()], a.Labels)
				if f == nil {
					f = &fired{labels: a.Labels, first: at}
					out[r.Name()] = append(out[r.Name()], f)
				}
				f.last = at
			}
		}
	}
	return out
}

func findFired(fs []*fired, l labels.Labels) *fired {
	for _, f := range fs {
		if labels.Equal(f.labels, l) {
			return f
		}
	}
	return nil
}

func (w want) matches(l labels.Labels) bool {
	for k, v := range w.labels {
		if l.Get(k) != v {
			return false
		}
	}
	return true
}

func minutes(d time.Duration) float64 { return d.Minutes() }

// checkScenario compares what fired with what the scenario wants, and nothing else.
func checkScenario(t *testing.T, sc alertScenario, got map[string][]*fired) {
	t.Helper()
	end := seriesSpan
	matched := map[*fired]bool{}
	for _, w := range sc.want {
		var hit *fired
		for _, f := range got[w.alert] {
			if w.matches(f.labels) {
				hit = f
			}
		}
		if hit == nil {
			t.Errorf("%s did not fire with %v (fired: %s)", w.alert, w.labels, describeFired(got))
			continue
		}
		matched[hit] = true
		if first := minutes(hit.first); first < w.notBefore || first > w.by {
			t.Errorf("%s first fired at minute %.1f, want between %.1f and %.1f", w.alert, first, w.notBefore, w.by)
		}
		if still := hit.last == end; still != w.firingAtEnd {
			t.Errorf("%s still firing at the end: %v, want %v (last at minute %.1f)", w.alert, still, w.firingAtEnd, minutes(hit.last))
		}
		if last := minutes(hit.last); w.lastFiring > 0 && (last < w.lastFiring-0.5 || last > w.lastFiring) {
			t.Errorf("%s last fired at minute %.1f, want between %.1f and %.1f", w.alert, last, w.lastFiring-0.5, w.lastFiring)
		}
	}
	for name, fs := range got {
		for _, f := range fs {
			if !matched[f] {
				t.Errorf("%s fired with %s (minutes %.1f-%.1f), which this scenario must not set off", name, f.labels, minutes(f.first), minutes(f.last))
			}
		}
	}
}

func describeFired(got map[string][]*fired) string {
	var out []string
	for name, fs := range got {
		for _, f := range fs {
			out = append(out, fmt.Sprintf("%s%s at %.1f", name, f.labels, minutes(f.first)))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// ruleSources are the rules as each install ships them: the kustomize file and the
// PrometheusRule the chart renders from its copy.
func ruleSources(t *testing.T) map[string][]*rules.AlertingRule {
	t.Helper()
	var chartRule monitoringv1.PrometheusRule
	obj := find(t, mustRender(t, map[string]any{"prometheusRule": map[string]any{"enabled": true}}), "PrometheusRule", releaseName)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &chartRule); err != nil {
		t.Fatal(err)
	}
	return map[string][]*rules.AlertingRule{
		rulesFile:     alertingRules(t, rulesFile, loadRule(t).Spec),
		"the chart's": alertingRules(t, "the chart's PrometheusRule", chartRule.Spec),
	}
}

// Each alert fires on what it is for (the first DEAD event, one parked message, a
// stuck consumer, a pipeline 6 minutes behind, ...) within its promised delay, and no
// alert fires on a healthy pipeline and consumer.
func TestAlertsFireOnTheirScenario(t *testing.T) {
	sources := ruleSources(t)
	covered := map[string]bool{}
	for _, sc := range alertScenarios {
		load := loadSeries(sc.changes)
		for where, rs := range sources {
			t.Run(sc.name+"/"+where, func(t *testing.T) {
				checkScenario(t, sc, evaluate(t, rs, load, sc.promDown))
			})
		}
		for _, w := range sc.want {
			covered[w.alert] = true
		}
	}
	for _, r := range alerts(t) {
		if !covered[r.Alert] {
			t.Errorf("no scenario sets off %s", r.Alert)
		}
	}
}
