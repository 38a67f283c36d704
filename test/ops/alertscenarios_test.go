package ops

import (
	"math"
	"strings"

	"github.com/outbox-operator/outbox-operator/inbox"
	"github.com/prometheus/prometheus/model/value"
)

// The synthetic series the alert rules are evaluated on (alerteval_test.go): a
// healthy pipeline and consumer, and one scenario per failure an alert is for.

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

// readEvery is a read timestamp (Unix seconds, the series starting at 0): a read every
// n minutes, the last one at minute stop.
func readEvery(n, stop float64) curve {
	return func(x float64) (float64, bool) {
		return math.Floor(min(x, stop)/n) * n * 60, true
	}
}

// staleMarker is the value Prometheus stores when a scrape fails: every series of
// the target is marked stale (and absent from then on until a scrape succeeds).
var staleMarker = math.Float64frombits(value.StaleNaN)

// unscraped is f with the target unreachable from minute m for d minutes: a staleness
// marker at the first failed scrape, then no samples until the scrapes succeed again.
func unscraped(m, d float64, f curve) curve {
	return func(x float64) (float64, bool) {
		switch {
		case x == m:
			return staleMarker, true
		case x > m && x < m+d:
			return 0, false
		}
		return f(x)
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
		{"outbox_pipeline_status_read_timestamp_seconds", manager, readEvery(15.0/60, math.Inf(1))},
		{"outbox_pipeline_status_interval_seconds", manager, always(15)},
		{"outbox_pipeline_slot_lag_bytes", manager, always(64 << 20)},
		{"outbox_pipeline_slot_active", manager, always(1)},
		{"outbox_replay_failed", `namespace="shop",pipeline="orders",replay="fix-too-large",job="outbox-operator-metrics"`, always(0)},
		{"outbox_retention_last_run_failed", `namespace="shop",pipeline="orders",policy="nightly",job="outbox-operator-metrics"`, always(0)},
		{"inbox_consume_dead_total", consumerPod + `,event_type="OrderPlaced",error_code="` + inbox.CodePermanent + `"`, always(3)},
		{"inbox_oldest_message_age_seconds", consumerPod, waiting(math.Inf(1), 0)},
		{"inbox_consumer_lag", consumerPod, always(12)},
		{"inbox_oldest_unhandled_message_age_seconds", consumerPod, waiting(math.Inf(1), 0)},
	}
}

// want is an alert that must fire: with these labels, first between notBefore and by
// (minutes), and still firing at the end of the hour or resolved by then; with
// lastFiring, firing for the last time in the half minute up to it.
type want struct {
	alert         string
	labels        map[string]string
	notBefore, by float64
	firingAtEnd   bool
	lastFiring    float64
}

type alertScenario struct {
	name    string
	changes []series // replace the healthy series of the same key (nil values: drop it), or add one
	want    []want
	// promDown: Prometheus is not running from minute [0] to [1] (no rule
	// evaluations); the series say what its storage holds.
	promDown [2]float64
}

// healthyWith is every healthy series changed by f (nil values: drop it).
func healthyWith(f func(s series) curve) []series {
	var out []series
	for _, s := range healthy() {
		s.values = f(s)
		out = append(out, s)
	}
	return out
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
		changes: []series{{"inbox_consume_dead_total", consumerPod + `,event_type="OrderPlaced",error_code="` + inbox.CodeRetriesExhausted + `"`, from(30, always(1))}},
		want:    []want{{alert: "InboxMessagesParked", labels: map[string]string{"error_code": inbox.CodeRetriesExhausted, "consumer_group": "billing"}, notBefore: 30, by: 30.5}},
	},
	{
		name:    "one more parked message of a code seen before",
		changes: []series{{"inbox_consume_dead_total", consumerPod + `,event_type="OrderPlaced",error_code="` + inbox.CodePermanent + `"`, step(3, 30, 4)}},
		want:    []want{{alert: "InboxMessagesParked", labels: map[string]string{"error_code": inbox.CodePermanent}, notBefore: 30, by: 30.5}},
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
		// The read timestamp stops with the reads: a failing read is not a stale status.
		name: "the outbox table cannot be read",
		changes: []series{
			{"outbox_pipeline_database_reachable", manager, step(1, 30, 0)},
			{"outbox_pipeline_status_read_timestamp_seconds", manager, readEvery(15.0/60, 30)},
		},
		want: []want{{alert: "OutboxDatabaseUnreachable", notBefore: 34.5, by: 35.5, firingAtEnd: true}},
	},
	{
		// Reads stop without failing (the manager's passes no longer run): stale once the
		// last read is older than 5 minutes (5 x 15 s is less).
		name:    "the operator stops reading a pipeline",
		changes: []series{{"outbox_pipeline_status_read_timestamp_seconds", manager, readEvery(15.0/60, 30)}},
		want:    []want{{alert: "OutboxPipelineStatusStale", labels: map[string]string{"namespace": "shop", "pipeline": "orders"}, notBefore: 35, by: 35.5, firingAtEnd: true}},
	},
	{
		// statusInterval 10m: a read 10 minutes old is on time, 5 intervals are 50 minutes.
		name: "a pipeline read every 10 minutes",
		changes: []series{
			{"outbox_pipeline_status_read_timestamp_seconds", manager, readEvery(10, math.Inf(1))},
			{"outbox_pipeline_status_interval_seconds", manager, always(600)},
		},
	},
	{
		name: "a pipeline read every 2 minutes whose reads stop",
		changes: []series{
			{"outbox_pipeline_status_read_timestamp_seconds", manager, readEvery(2, 30)},
			{"outbox_pipeline_status_interval_seconds", manager, always(120)},
		},
		want: []want{{alert: "OutboxPipelineStatusStale", notBefore: 40, by: 40.5, firingAtEnd: true}},
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
		// Nothing happened at minute 30 but the start of a Prometheus whose storage is
		// empty (a first install, a lost volume): every series begins there. Counters
		// that counted events long ago look like series born with those events, so
		// each alert that counts a new series with its whole value fires once per
		// non-zero label set, for 15 minutes, then resolves by itself
		// (docs/monitoring.md, "Alerts"). OutboxLeaseExpiriesRising's 15m `for:` keeps
		// it silent.
		name:    "Prometheus started with empty storage",
		changes: healthyWith(func(s series) curve { return from(30, s.values) }),
		want: []want{
			{alert: "OutboxDeadEventsIncreasing", labels: map[string]string{"code": "MESSAGE_TOO_LARGE"}, notBefore: 30, by: 30, lastFiring: 45},
			{alert: "OutboxUnknownSendOutcomes", labels: map[string]string{"destination": "orders"}, notBefore: 30, by: 30, lastFiring: 45},
			{alert: "OutboxMarksFenced", labels: map[string]string{"pipeline": "orders"}, notBefore: 30, by: 30, lastFiring: 45},
			{alert: "InboxMessagesParked", labels: map[string]string{"error_code": inbox.CodePermanent}, notBefore: 30, by: 30, lastFiring: 45},
		},
	},
	{
		// Prometheus restarts (or is rescheduled) and keeps its storage: 25 minutes
		// without samples or evaluations. A counter last seen before the gap is not a
		// new series.
		name: "Prometheus down for 25 minutes, its storage kept",
		changes: healthyWith(func(s series) curve {
			return func(x float64) (float64, bool) {
				if x >= 25 && x < 50 {
					return 0, false
				}
				return s.values(x)
			}
		}),
		promDown: [2]float64{25, 50},
	},
	{
		// One failed scrape marks every series of the pod stale; the next one brings
		// them back. That is no new series either (15 minutes later, a selector with
		// `offset 15m` finds the stale marker, not the counter).
		name: "one failed scrape of a relay pod",
		changes: healthyWith(func(s series) curve {
			if s.labels == relayPod || strings.HasPrefix(s.labels, relayPod+",") {
				return unscraped(30, 0.5, s.values)
			}
			return s.values
		}),
	},
	{
		name: "a relay pod unreachable for 25 minutes",
		changes: healthyWith(func(s series) curve {
			if s.labels == relayPod || strings.HasPrefix(s.labels, relayPod+",") {
				return unscraped(25, 25, s.values)
			}
			return s.values
		}),
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
