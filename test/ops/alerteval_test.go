package ops

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
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

// Scraped label sets: what the PodMonitor, the ServiceMonitor and a consumer's own
// scrape config attach.
const (
	relayPod    = `namespace="shop",pipeline="orders",pod="orders-relay-7d9f-x2x4k",job="shop/outbox-relay"`
	relayNewPod = `namespace="shop",pipeline="orders",pod="orders-relay-7d9f-q8n2c",job="shop/outbox-relay"`
	manager     = `namespace="shop",pipeline="orders",job="outbox-operator-metrics"`
	consumerPod = `namespace="shop",consumer_group="billing",topic="orders",pod="billing-5c6b-k7p9z",job="billing"`
)

// A value over time: minutes since the series' start to a sample, ok false for none.
type curve func(min float64) (v float64, ok bool)

func always(v float64) curve { return func(float64) (float64, bool) { return v, true } }

// from is absent before minute m, then f.
func from(m float64, f curve) curve {
	return func(x float64) (float64, bool) {
		if x < m {
			return 0, false
		}
		return f(x)
	}
}

// step is before until minute m, after from then on.
func step(before, m, after float64) curve {
	return func(x float64) (float64, bool) {
		if x < m {
			return before, true
		}
		return after, true
	}
}

// waiting is an age gauge: 0, then growing in real time from minute m for d minutes
// (something waits), then 0 again (it got through). d < 0 means it never gets through.
func waiting(m, d float64) curve {
	return func(x float64) (float64, bool) {
		if x < m || d >= 0 && x > m+d {
			return float64(int(x*60) % 7), true // a healthy few seconds, never quite 0
		}
		return (x - m) * 60, true
	}
}

// everyMinutes counts one event every n minutes from minute m on, starting at 1.
func everyMinutes(m, n float64) curve {
	return func(x float64) (float64, bool) {
		if x < m {
			return 0, false
		}
		return 1 + math.Floor((x-m)/n), true
	}
}

type series struct {
	name, labels string
	values       curve
}

func (s series) key() string { return s.name + "{" + s.labels + "}" }

// healthy is a pipeline and a consumer that work: every metric an alert reads, with
// values no alert should fire on, including counters that counted events long ago.
func healthy() []series {
	grow := func(per float64) curve { return func(x float64) (float64, bool) { return math.Floor(x * per), true } }
	return []series{
		{"outbox_pipeline_oldest_pending_age_seconds", manager, waiting(math.Inf(1), 0)},
		{"outbox_oldest_pending_age_seconds", relayPod, waiting(math.Inf(1), 0)},
		{"outbox_send_success_total", relayPod + `,destination="orders"`, grow(6000)},
		{"outbox_send_dead_total", relayPod + `,destination="orders",code="MESSAGE_TOO_LARGE"`, always(4)},
		{"outbox_send_unknown_total", relayPod + `,destination="orders"`, always(2)},
		{"outbox_lease_expired_total", relayPod, always(3)},
		{"outbox_mark_fenced_total", relayPod, always(1)},
		{"outbox_broker_up", relayPod, always(1)},
		{"outbox_pipeline_workers_desired", manager, always(2)},
		{"outbox_pipeline_workers_ready", manager, always(2)},
		{"outbox_pipeline_database_reachable", manager, always(1)},
		{"outbox_pipeline_slot_lag_bytes", manager, always(64 << 20)},
		{"outbox_pipeline_slot_active", manager, always(1)},
		{"outbox_replay_failed", `namespace="shop",pipeline="orders",replay="fix-too-large",job="outbox-operator-metrics"`, always(0)},
		{"outbox_retention_last_run_failed", `namespace="shop",pipeline="orders",policy="nightly",job="outbox-operator-metrics"`, always(0)},
		{"inbox_consume_dead_total", consumerPod + `,event_type="OrderPlaced",error_code="HANDLER_PERMANENT"`, always(3)},
		{"inbox_oldest_message_age_seconds", consumerPod, waiting(math.Inf(1), 0)},
		{"inbox_consumer_lag", consumerPod, always(12)},
		{"inbox_oldest_unhandled_message_age_seconds", consumerPod, waiting(math.Inf(1), 0)},
	}
}

// want is an alert that must fire: with these labels, first between notBefore and by
// (minutes), and still firing at the end of the hour or resolved by then.
type want struct {
	alert         string
	labels        map[string]string
	notBefore, by float64
	firingAtEnd   bool
}

type alertScenario struct {
	name    string
	changes []series // replace the healthy series of the same key (nil values: drop it), or add one
	want    []want
}

var alertScenarios = []alertScenario{
	{name: "healthy"},
	{
		name:    "the first DEAD event of a code",
		changes: []series{{"outbox_send_dead_total", relayPod + `,destination="orders",code="NOT_ENOUGH_REPLICAS"`, from(30, always(1))}},
		want:    []want{{alert: "OutboxDeadEventsIncreasing", labels: map[string]string{"code": "NOT_ENOUGH_REPLICAS", "destination": "orders"}, notBefore: 30, by: 30.5}},
	},
	{
		name:    "one more DEAD event of a code seen before",
		changes: []series{{"outbox_send_dead_total", relayPod + `,destination="orders",code="MESSAGE_TOO_LARGE"`, step(4, 30, 5)}},
		want:    []want{{alert: "OutboxDeadEventsIncreasing", labels: map[string]string{"code": "MESSAGE_TOO_LARGE"}, notBefore: 30, by: 30.5}},
	},
	{
		name:    "a DEAD event counted before a new worker's first scrape",
		changes: []series{{"outbox_send_dead_total", relayNewPod + `,destination="orders",code="MESSAGE_TOO_LARGE"`, from(30, always(1))}},
		want:    []want{{alert: "OutboxDeadEventsIncreasing", labels: map[string]string{"code": "MESSAGE_TOO_LARGE"}, notBefore: 30, by: 30.5}},
	},
	{
		name:    "one parked message",
		changes: []series{{"inbox_consume_dead_total", consumerPod + `,event_type="OrderPlaced",error_code="HANDLER_RETRIES_EXHAUSTED"`, from(30, always(1))}},
		want:    []want{{alert: "InboxMessagesParked", labels: map[string]string{"error_code": "HANDLER_RETRIES_EXHAUSTED", "consumer_group": "billing"}, notBefore: 30, by: 30.5}},
	},
	{
		name:    "one more parked message of a code seen before",
		changes: []series{{"inbox_consume_dead_total", consumerPod + `,event_type="OrderPlaced",error_code="HANDLER_PERMANENT"`, step(3, 30, 4)}},
		want:    []want{{alert: "InboxMessagesParked", labels: map[string]string{"error_code": "HANDLER_PERMANENT"}, notBefore: 30, by: 30.5}},
	},
	{
		// The offsets stop moving, so the lag gauges freeze at healthy values: only the
		// gauge of the oldest unhandled message shows it.
		name: "a consumer stuck on one message",
		changes: []series{
			{"inbox_oldest_unhandled_message_age_seconds", consumerPod, waiting(25, -1)},
			{"inbox_oldest_message_age_seconds", consumerPod, always(2)},
			{"inbox_consumer_lag", consumerPod, always(12)},
		},
		want: []want{{alert: "InboxConsumerStuck", labels: map[string]string{"consumer_group": "billing", "topic": "orders"}, notBefore: 29.5, by: 30.5, firingAtEnd: true}},
	},
	{
		name:    "a consumer held up for 4 minutes, then moving",
		changes: []series{{"inbox_oldest_unhandled_message_age_seconds", consumerPod, waiting(25, 4)}},
	},
	{
		name:    "a consumer far behind, handling old messages for 15 minutes",
		changes: []series{{"inbox_oldest_message_age_seconds", consumerPod, step(2, 25, 900)}},
		want:    []want{{alert: "InboxConsumerLagging", labels: map[string]string{"consumer_group": "billing"}, notBefore: 34.5, by: 35.5, firingAtEnd: true}},
	},
	{
		// The manager's gauge only (no relay worker runs, as when all are crash-looping).
		name: "a pipeline 6 minutes behind, then caught up",
		changes: []series{
			{"outbox_pipeline_oldest_pending_age_seconds", manager, waiting(25, 6)},
			{"outbox_oldest_pending_age_seconds", relayPod, nil},
		},
		want: []want{{alert: "OutboxEventsDelayed", labels: map[string]string{"namespace": "shop", "pipeline": "orders"}, notBefore: 29.5, by: 30.5}},
	},
	{
		name:    "a pipeline behind that its relay worker reports",
		changes: []series{{"outbox_oldest_pending_age_seconds", relayPod, waiting(25, -1)}},
		want:    []want{{alert: "OutboxEventsDelayed", labels: map[string]string{"pipeline": "orders"}, notBefore: 29.5, by: 30.5, firingAtEnd: true}},
	},
	{
		// Under the 5 minutes the alert's text promises: no alert.
		name:    "a pipeline 4.5 minutes behind, then caught up",
		changes: []series{{"outbox_pipeline_oldest_pending_age_seconds", manager, waiting(25, 4.5)}},
	},
	{
		name:    "the first unknown outcome",
		changes: []series{{"outbox_send_unknown_total", relayPod + `,destination="payments"`, from(30, always(1))}},
		want:    []want{{alert: "OutboxUnknownSendOutcomes", labels: map[string]string{"destination": "payments"}, notBefore: 30, by: 30.5}},
	},
	{
		name:    "a fenced mark",
		changes: []series{{"outbox_mark_fenced_total", relayPod, step(1, 30, 2)}},
		want:    []want{{alert: "OutboxMarksFenced", labels: map[string]string{"pipeline": "orders"}, notBefore: 30, by: 30.5}},
	},
	{
		// A replacement worker takes over the dead one's leases before its first scrape:
		// that alone is a failover, not leases that keep expiring.
		name:    "one lease takeover by a new worker",
		changes: []series{{"outbox_lease_expired_total", relayNewPod, from(30, always(1))}},
	},
	{
		name:    "leases that keep expiring on a new worker",
		changes: []series{{"outbox_lease_expired_total", relayNewPod, everyMinutes(30, 4)}},
		want:    []want{{alert: "OutboxLeaseExpiriesRising", labels: map[string]string{"pipeline": "orders"}, notBefore: 44.5, by: 45.5, firingAtEnd: true}},
	},
	{
		name:    "the broker refuses every write",
		changes: []series{{"outbox_broker_up", relayPod, step(1, 30, 0)}},
		want:    []want{{alert: "OutboxBrokerUnavailable", notBefore: 31.5, by: 32.5, firingAtEnd: true}},
	},
	{
		name:    "no relay worker ready",
		changes: []series{{"outbox_pipeline_workers_ready", manager, step(2, 30, 0)}},
		want:    []want{{alert: "OutboxNoReadyWorkers", notBefore: 34.5, by: 35.5, firingAtEnd: true}},
	},
	{
		name:    "the outbox table cannot be read",
		changes: []series{{"outbox_pipeline_database_reachable", manager, step(1, 30, 0)}},
		want:    []want{{alert: "OutboxDatabaseUnreachable", notBefore: 34.5, by: 35.5, firingAtEnd: true}},
	},
	{
		name: "a replication slot nobody reads, holding 2 GiB",
		changes: []series{
			{"outbox_pipeline_slot_active", manager, step(1, 30, 0)},
			{"outbox_pipeline_slot_lag_bytes", manager, step(64<<20, 30, 2<<30)},
		},
		want: []want{
			{alert: "OutboxReplicationSlotInactive", notBefore: 39.5, by: 40.5, firingAtEnd: true},
			{alert: "OutboxReplicationSlotLagging", notBefore: 39.5, by: 40.5, firingAtEnd: true},
		},
	},
	{
		name:    "a failed replay",
		changes: []series{{"outbox_replay_failed", `namespace="shop",pipeline="orders",replay="fix-too-large",job="outbox-operator-metrics"`, step(0, 30, 1)}},
		want:    []want{{alert: "OutboxReplayFailed", labels: map[string]string{"replay": "fix-too-large"}, notBefore: 30, by: 30.5, firingAtEnd: true}},
	},
	{
		name:    "a failed archive run",
		changes: []series{{"outbox_retention_last_run_failed", `namespace="shop",pipeline="orders",policy="nightly",job="outbox-operator-metrics"`, step(0, 30, 1)}},
		want:    []want{{alert: "OutboxRetentionRunFailed", labels: map[string]string{"policy": "nightly"}, notBefore: 30, by: 30.5, firingAtEnd: true}},
	},
}

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
			if v, ok := s.values(at.Minutes()); ok {
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

// evaluate runs every rule every scrapeEvery from evalFrom to the end of the series
// and returns the alerts that reached firing.
func evaluate(t *testing.T, rs []*rules.AlertingRule, load string) map[string][]*fired {
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
				checkScenario(t, sc, evaluate(t, rs, load))
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
