package inbox

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a consumer's Prometheus collectors (docs/architecture.md, "Consumers").
// Labels are the consumer group, topic, event type and outcome or error code: never
// an event id, which would make one time series per event. Register them once:
//
//	m := inbox.NewMetrics()
//	prometheus.MustRegister(m)
//	c, _ := inbox.NewConsumer(store, handler, inbox.Options{Metrics: m})
type Metrics struct {
	messages    *prometheus.CounterVec
	dedupHits   *prometheus.CounterVec
	retries     *prometheus.CounterVec
	dead        *prometheus.CounterVec
	gaps        *prometheus.CounterVec
	outOfOrder  *prometheus.CounterVec
	lag         *prometheus.GaugeVec
	oldestAge   *prometheus.GaugeVec
	storeFaults *prometheus.CounterVec
	unhandled   *prometheus.GaugeVec // set from the running consumers at Collect time
	byName      map[string]*prometheus.CounterVec

	srcMu   sync.Mutex
	sources map[*Consumer]int // running Runs per consumer
}

// NewMetrics returns unregistered collectors; Metrics is a prometheus.Collector.
func NewMetrics() *Metrics {
	ev := []string{"consumer_group", "topic", "event_type"}
	byName := map[string]*prometheus.CounterVec{}
	counter := func(name, help string, extra ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append(ev[:3:3], extra...))
		byName[name] = v
		return v
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"consumer_group", "topic"})
	}
	m := &Metrics{
		messages:   counter("inbox_messages_total", "Messages handled, by outcome (applied, duplicate, stale, gap, parked).", "outcome"),
		dedupHits:  counter("inbox_dedup_hit_total", "Redelivered events the dedup row absorbed."),
		retries:    counter("inbox_consume_retry_total", "Handler tries that failed and were retried, by error class.", "class"),
		dead:       counter("inbox_consume_dead_total", "Messages parked, by error code.", "error_code"),
		gaps:       counter("inbox_version_gap_total", "Events whose aggregate version skipped ahead of last applied + 1."),
		outOfOrder: counter("inbox_out_of_order_total", "Events older than the aggregate's last applied version (stale)."),
		lag:        gauge("inbox_consumer_lag", "Messages behind the partitions' high watermarks, summed over the partitions this consumer read."),
		oldestAge:  gauge("inbox_oldest_message_age_seconds", "Age (broker timestamp to now) of the oldest message in the last batch handled."),
		storeFaults: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "inbox_store_fault_total",
			Help: "Passing faults of the consumer's own statements (dedup row, version guard, park, commit) waited out without counting a try."},
			[]string{"consumer_group", "topic"}),
		unhandled: gauge("inbox_oldest_unhandled_message_age_seconds",
			"Age (broker timestamp to now) of the oldest message fetched and not yet handled and committed; 0 when none is outstanding. Grows while a consumer is stuck."),
		byName: byName,
	}
	m.byName["inbox_store_fault_total"] = m.storeFaults
	return m
}

func (m *Metrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.messages, m.dedupHits, m.retries, m.dead, m.gaps, m.outOfOrder, m.lag, m.oldestAge, m.storeFaults, m.unhandled}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.all() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.collectUnhandled(time.Now())
	for _, c := range m.all() {
		c.Collect(ch)
	}
}

func (m *Metrics) outcome(group, topic string, msg Message, o Outcome) {
	if m == nil {
		return
	}
	m.messages.WithLabelValues(group, topic, msg.EventType, o.String()).Inc()
	switch o {
	case Duplicate:
		m.dedupHits.WithLabelValues(group, topic, msg.EventType).Inc()
	case Stale:
		m.outOfOrder.WithLabelValues(group, topic, msg.EventType).Inc()
	case Gap:
		m.gaps.WithLabelValues(group, topic, msg.EventType).Inc()
	}
}

func (m *Metrics) retry(group, topic string, msg Message, c Class) {
	if m != nil {
		m.retries.WithLabelValues(group, topic, msg.EventType, c.String()).Inc()
	}
}

func (m *Metrics) storeFault(group, topic string) {
	if m != nil {
		m.storeFaults.WithLabelValues(group, topic).Inc()
	}
}

func (m *Metrics) parked(group, topic string, msg Message, code string) {
	if m != nil {
		m.messages.WithLabelValues(group, topic, msg.EventType, Parked.String()).Inc()
		m.dead.WithLabelValues(group, topic, msg.EventType, code).Inc()
	}
}

// progress records lag and age from a handled batch; lagByPartition is kept by the
// consumer (the newest high watermark minus the next offset, per partition).
func (m *Metrics) progress(group, topic string, lag int64, oldest time.Time, now time.Time) {
	if m == nil {
		return
	}
	m.lag.WithLabelValues(group, topic).Set(float64(lag))
	if !oldest.IsZero() {
		m.oldestAge.WithLabelValues(group, topic).Set(now.Sub(oldest).Seconds())
	}
}

// Counter returns the counter called name with the given label values, for tests
// and for applications that export the numbers some other way. It returns nil for
// an unknown name.
func (m *Metrics) Counter(name string, labels ...string) prometheus.Counter {
	if v, ok := m.byName[name]; ok {
		return v.WithLabelValues(labels...)
	}
	return nil
}

// watch adds c to the consumers whose outstanding messages the unhandled gauge reads;
// unwatch takes it out when its Run ends (its series then read 0).
func (m *Metrics) watch(c *Consumer) {
	if m == nil {
		return
	}
	m.srcMu.Lock()
	defer m.srcMu.Unlock()
	if m.sources == nil {
		m.sources = map[*Consumer]int{}
	}
	m.sources[c]++
}

func (m *Metrics) unwatch(c *Consumer) {
	if m == nil {
		return
	}
	m.srcMu.Lock()
	defer m.srcMu.Unlock()
	if m.sources[c]--; m.sources[c] <= 0 {
		delete(m.sources, c)
	}
	for topic := range c.open.oldest() {
		m.unhandled.WithLabelValues(c.s.group, topic).Set(0)
	}
}

// collectUnhandled sets inbox_oldest_unhandled_message_age_seconds from the running
// consumers: per consumer group and topic, the age of the oldest outstanding message
// (the oldest of several consumers of one group in this process), 0 if none.
func (m *Metrics) collectUnhandled(now time.Time) {
	m.srcMu.Lock()
	defer m.srcMu.Unlock()
	ages := map[[2]string]float64{}
	for c := range m.sources {
		for topic, t := range c.open.oldest() {
			k := [2]string{c.s.group, topic}
			age := 0.0
			if !t.IsZero() {
				age = max(now.Sub(t).Seconds(), 0)
			}
			ages[k] = max(ages[k], age)
		}
	}
	for k, age := range ages {
		m.unhandled.WithLabelValues(k[0], k[1]).Set(age)
	}
}
