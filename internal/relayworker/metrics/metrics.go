// Package metrics defines the relay's Prometheus metrics (docs/worker-contract.md,
// "Endpoints") on a private registry. Labels are bounded: destination (topic) and a
// stable error code, never event ids.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics of one relay process.
type Metrics struct {
	Registry *prometheus.Registry

	PendingCount     prometheus.Gauge
	OldestPendingAge prometheus.Gauge
	ClaimLatency     prometheus.Histogram
	ClaimBatchSize   prometheus.Histogram
	PublishLatency   prometheus.Histogram
	SendSuccess      *prometheus.CounterVec // destination
	SendRetry        *prometheus.CounterVec // destination, code
	SendDead         *prometheus.CounterVec // destination, code
	SendUnknown      *prometheus.CounterVec // destination
	TableDeadTuples  prometheus.Gauge
	TableLiveTuples  prometheus.Gauge
	TableSizeBytes   prometheus.Gauge
	LeaseExpired     prometheus.Counter
	LeaseReleased    prometheus.Counter
	MarkFenced       prometheus.Counter
	BrokerUp         prometheus.Gauge
	BrokerPauses     prometheus.Counter
	Errors           *prometheus.CounterVec // stage

	// Logical-replication mode (internal/relayworker/cdc).
	CDCReader       prometheus.Gauge
	CDCDelivered    prometheus.Counter
	CDCClaimed      prometheus.Counter
	CDCQueued       prometheus.Gauge
	CDCConfirmedLSN prometheus.Gauge
}

// New registers the metrics; pipeline becomes a constant label when not empty.
func New(pipeline string) *Metrics {
	reg := prometheus.NewRegistry()
	var r prometheus.Registerer = reg
	if pipeline != "" {
		r = prometheus.WrapRegistererWith(prometheus.Labels{"pipeline": pipeline}, reg)
	}
	m := &Metrics{
		Registry: reg,
		PendingCount: prometheus.NewGauge(prometheus.GaugeOpts{Name: "outbox_pending_count",
			Help: "Non-terminal outbox rows (PENDING, SENDING, RETRY)."}),
		OldestPendingAge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "outbox_oldest_pending_age_seconds",
			Help: "Age of the oldest non-terminal outbox row (database clock)."}),
		ClaimLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "outbox_claim_latency_seconds",
			Help: "Duration of one claim statement.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		ClaimBatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "outbox_claim_batch_size",
			Help: "Rows returned by one claim.", Buckets: prometheus.ExponentialBuckets(1, 4, 7)}),
		PublishLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "outbox_publish_latency_seconds",
			Help: "Duration of one batch write to Kafka.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		SendSuccess: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "outbox_send_success_total",
			Help: "Events the brokers acknowledged (a mark fenced by a newer owner still counts; see outbox_mark_fenced_total)."}, []string{"destination"}),
		SendRetry: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "outbox_send_retry_total",
			Help: "Failed publishes scheduled for RETRY, by error code."}, []string{"destination", "code"}),
		SendDead: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "outbox_send_dead_total",
			Help: "Events moved to DEAD, by error code."}, []string{"destination", "code"}),
		SendUnknown: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "outbox_send_unknown_total",
			Help: "Publishes with an unknown outcome (may be duplicated on retry)."}, []string{"destination"}),
		TableDeadTuples: prometheus.NewGauge(prometheus.GaugeOpts{Name: "outbox_table_dead_tuples",
			Help: "Dead tuples in the outbox table (pg_stat_user_tables.n_dead_tup): they slow claims until vacuumed."}),
		TableLiveTuples: prometheus.NewGauge(prometheus.GaugeOpts{Name: "outbox_table_live_tuples",
			Help: "Live tuples in the outbox table (pg_stat_user_tables.n_live_tup, an estimate)."}),
		TableSizeBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "outbox_table_size_bytes",
			Help: "Size of the outbox table with its indexes and TOAST (pg_total_relation_size)."}),
		LeaseExpired: prometheus.NewCounter(prometheus.CounterOpts{Name: "outbox_lease_expired_total",
			Help: "Rows taken over from an expired SENDING lease (possible duplicates)."}),
		LeaseReleased: prometheus.NewCounter(prometheus.CounterOpts{Name: "outbox_lease_released_total",
			Help: "Claimed rows handed back unpublished (shutdown, lease guard, order guard)."}),
		MarkFenced: prometheus.NewCounter(prometheus.CounterOpts{Name: "outbox_mark_fenced_total",
			Help: "Marks that changed nothing because another worker owns the row now (its publish may duplicate ours)."}),
		BrokerUp: prometheus.NewGauge(prometheus.GaugeOpts{Name: "outbox_broker_up",
			Help: "1 while the worker can publish; 0 while it has paused claiming because no broker stores anything (rows keep their attempts)."}),
		BrokerPauses: prometheus.NewCounter(prometheus.CounterOpts{Name: "outbox_broker_pauses_total",
			Help: "Times the worker paused claiming for a broker-wide failure."}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "outbox_relay_errors_total",
			Help: "Relay loop errors by stage (claim, mark, listen, stats)."}, []string{"stage"}),
		CDCReader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "outbox_cdc_reader",
			Help: "1 while this worker holds the replication slot and streams the outbox table's inserts; 0 while it stands by."}),
		CDCDelivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "outbox_cdc_delivered_total",
			Help: "Outbox inserts logical replication delivered to this worker (re-deliveries after a restart count again)."}),
		CDCClaimed: prometheus.NewCounter(prometheus.CounterOpts{Name: "outbox_cdc_claimed_total",
			Help: "Rows claimed by id from delivered inserts (the rest were already taken, or left to polling for their order)."}),
		CDCQueued: prometheus.NewGauge(prometheus.GaugeOpts{Name: "outbox_cdc_queued",
			Help: "Delivered inserts waiting to be claimed."}),
		CDCConfirmedLSN: prometheus.NewGauge(prometheus.GaugeOpts{Name: "outbox_cdc_confirmed_lsn",
			Help: "The WAL position this worker last confirmed to its slot, as a number."}),
	}
	r.MustRegister(m.CDCReader, m.CDCDelivered, m.CDCClaimed, m.CDCQueued, m.CDCConfirmedLSN)
	r.MustRegister(m.PendingCount, m.OldestPendingAge, m.TableDeadTuples, m.TableLiveTuples, m.TableSizeBytes, m.ClaimLatency, m.ClaimBatchSize, m.PublishLatency,
		m.SendSuccess, m.SendRetry, m.SendDead, m.SendUnknown, m.LeaseExpired, m.LeaseReleased, m.MarkFenced, m.BrokerUp, m.BrokerPauses, m.Errors)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}
