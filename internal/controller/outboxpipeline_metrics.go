/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// The manager's own Prometheus metrics (docs/monitoring.md, "Manager metrics"), on
// controller-runtime's registry so they are served next to its workqueue metrics.
//
// outbox_pipeline_* are set from the snapshot each OutboxPipeline pass reads with
// internal/outboxstats: one series per pipeline, which exists even while no relay
// worker runs (paused, crash-looping, database down), when the workers' own metrics
// are gone. Only the leader reconciles, so only the leader exports them.
//
// outbox_replay_failed and outbox_retention_last_run_failed are read from the
// manager's cache at scrape time (ResourceCollector): the status is the record, so
// nothing has to be kept in step with it and a deleted resource simply disappears.

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
)

// pipelineGauges are the per-pipeline gauges, labelled namespace and pipeline.
type pipelineGauges struct {
	// Read from the table; absent (not stale) while the table cannot be read.
	pending, sending, retrying, dead, expiredLeases, oldestAge, brokerDown *prometheus.GaugeVec
	// LogicalReplication only: the slot as pg_replication_slots reports it.
	slotLag, slotActive *prometheus.GaugeVec
	// Always present while the pipeline exists.
	dbReachable, workersReady, workersDesired *prometheus.GaugeVec
	// Set by every pass that read the table, kept while reads fail: how old the
	// status's numbers are, without a status write per pass.
	readTimestamp *prometheus.GaugeVec
	// spec.monitoring.statusInterval, so an alert can tell a stale read timestamp
	// from a pipeline that is read rarely (OutboxPipelineStatusStale).
	statusInterval *prometheus.GaugeVec
}

func newPipelineGauges() *pipelineGauges {
	g := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "outbox_pipeline_" + name, Help: help},
			[]string{"namespace", "pipeline"})
	}
	return &pipelineGauges{
		pending:  g("pending", "PENDING rows of the pipeline's outbox table, at the last status pass."),
		sending:  g("sending", "SENDING rows (claimed under a lease), at the last status pass."),
		retrying: g("retrying", "RETRY rows (failed publishes waiting for their backoff), at the last status pass."),
		dead:     g("dead", "DEAD rows (need a fix and a DeadLetterReplay), at the last status pass."),
		expiredLeases: g("expired_leases",
			"SENDING rows whose lease has expired (their worker died or stalled), at the last status pass."),
		oldestAge: g("oldest_pending_age_seconds",
			"Age of the oldest PENDING, SENDING or RETRY row at the last status pass (0 when none)."),
		brokerDown: g("broker_unavailable_workers",
			"Relay workers that report no reachable Kafka broker and have paused claiming."),
		dbReachable: g("database_reachable",
			"1 when the last status pass read the outbox table, 0 when it could not (DSN, network, missing table or Secret)."),
		slotLag: g("slot_lag_bytes",
			"WAL bytes the pipeline's replication slot holds back (LogicalReplication; absent in Polling mode)."),
		slotActive: g("slot_active",
			"1 while a relay worker streams from the pipeline's replication slot, 0 while none does (LogicalReplication)."),
		workersReady:   g("workers_ready", "Ready relay pods of the pipeline's Deployment."),
		workersDesired: g("workers_desired", "Desired relay pods (0 while spec.paused)."),
		readTimestamp: g("status_read_timestamp_seconds",
			"Unix time of the last status pass that read the outbox table; kept while reads fail."),
		statusInterval: g("status_interval_seconds",
			"The pipeline's spec.monitoring.statusInterval: how often a status pass reads its outbox table."),
	}
}

func (m *pipelineGauges) tableVecs() []*prometheus.GaugeVec {
	return []*prometheus.GaugeVec{m.pending, m.sending, m.retrying, m.dead, m.expiredLeases, m.oldestAge, m.brokerDown, m.slotLag, m.slotActive}
}

func (m *pipelineGauges) collectors() []prometheus.Collector {
	var out []prometheus.Collector
	for _, v := range append(m.tableVecs(), m.dbReachable, m.workersReady, m.workersDesired, m.readTimestamp, m.statusInterval) {
		out = append(out, v)
	}
	return out
}

// pipelineMetrics is registered once per process, like controller-runtime's own
// metrics, so a test that builds several managers does not register twice.
var pipelineMetrics = newPipelineGauges()

func init() { metrics.Registry.MustRegister(pipelineMetrics.collectors()...) }

// observe records one pass that got as far as reading the table: the workers'
// counts from st, the table's from s unless dbProblem says it could not be read.
func (m *pipelineGauges) observe(p *outboxv1.OutboxPipeline, st *outboxv1.OutboxPipelineStatus,
	s outboxstats.Stats, dbProblem *refProblem, now time.Time) {
	ns, name := p.Namespace, p.Name
	m.workersReady.WithLabelValues(ns, name).Set(float64(st.ReadyWorkers))
	m.workersDesired.WithLabelValues(ns, name).Set(float64(st.Replicas))
	m.statusInterval.WithLabelValues(ns, name).Set(p.Spec.Monitoring.StatusInterval.Seconds())
	if dbProblem != nil {
		m.unread(ns, name)
		return
	}
	m.dbReachable.WithLabelValues(ns, name).Set(1)
	m.readTimestamp.WithLabelValues(ns, name).Set(float64(now.UnixNano()) / 1e9)
	m.pending.WithLabelValues(ns, name).Set(float64(s.Pending))
	m.sending.WithLabelValues(ns, name).Set(float64(s.Sending))
	m.retrying.WithLabelValues(ns, name).Set(float64(s.Retrying))
	m.dead.WithLabelValues(ns, name).Set(float64(s.Dead))
	m.expiredLeases.WithLabelValues(ns, name).Set(float64(s.ExpiredLeases))
	m.brokerDown.WithLabelValues(ns, name).Set(float64(s.Workers.BrokerDown))
	age := 0.0
	if !s.OldestPending.IsZero() {
		age = max(now.Sub(s.OldestPending).Seconds(), 0)
	}
	m.oldestAge.WithLabelValues(ns, name).Set(age)
	if rs := st.Replication; rs != nil && rs.Exists && p.Spec.LogicalReplication() {
		m.slotLag.WithLabelValues(ns, name).Set(float64(rs.LagBytes))
		active := 0.0
		if rs.Active {
			active = 1
		}
		m.slotActive.WithLabelValues(ns, name).Set(active)
	} else {
		m.slotLag.DeleteLabelValues(ns, name)
		m.slotActive.DeleteLabelValues(ns, name)
	}
}

// unread records a pass that could not read the table (a refProblem before or at the
// read): reachable 0, and the table's numbers dropped rather than left stale.
func (m *pipelineGauges) unread(ns, name string) {
	m.dbReachable.WithLabelValues(ns, name).Set(0)
	for _, v := range m.tableVecs() {
		v.DeleteLabelValues(ns, name)
	}
}

// forget deletes every series of a deleted pipeline.
func (m *pipelineGauges) forget(ns, name string) {
	m.unread(ns, name)
	for _, v := range []*prometheus.GaugeVec{m.dbReachable, m.workersReady, m.workersDesired, m.readTimestamp, m.statusInterval} {
		v.DeleteLabelValues(ns, name)
	}
}

// ResourceCollector exports the outcome of replays and retention runs from the
// status the reconcilers wrote, read from reader (the manager's cache) at scrape time.
type ResourceCollector struct {
	reader         client.Reader
	replayFailed   *prometheus.Desc
	retentionError *prometheus.Desc
}

// NewResourceCollector returns a collector to register on metrics.Registry.
func NewResourceCollector(reader client.Reader) *ResourceCollector {
	return &ResourceCollector{
		reader: reader,
		replayFailed: prometheus.NewDesc("outbox_replay_failed",
			"1 while a DeadLetterReplay is in phase Failed (canary died again, or its Job failed), 0 otherwise.",
			[]string{"namespace", "replay", "pipeline"}, nil),
		retentionError: prometheus.NewDesc("outbox_retention_last_run_failed",
			"1 when the newest archive run of a RetentionPolicy failed (Degraded reason LastRunFailed), 0 otherwise.",
			[]string{"namespace", "policy", "pipeline"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *ResourceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.replayFailed
	ch <- c.retentionError
}

// scrapeTimeout bounds a cache read; the cache answers from memory once synced, so
// only a manager that is still starting waits, and its scrape then lacks these series.
const scrapeTimeout = 2 * time.Second

// Collect implements prometheus.Collector. A list that fails (cache not synced yet)
// contributes nothing: absent series, not wrong ones.
func (c *ResourceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	var replays outboxv1.DeadLetterReplayList
	if c.reader.List(ctx, &replays) == nil {
		for i := range replays.Items {
			r := &replays.Items[i]
			ch <- prometheus.MustNewConstMetric(c.replayFailed, prometheus.GaugeValue,
				boolValue(r.Status.Phase == outboxv1.ReplayFailed), r.Namespace, r.Name, r.Spec.PipelineRef.Name)
		}
	}
	var policies outboxv1.RetentionPolicyList
	if c.reader.List(ctx, &policies) == nil {
		for i := range policies.Items {
			rp := &policies.Items[i]
			cond := meta.FindStatusCondition(rp.Status.Conditions, outboxv1.ConditionDegraded)
			failed := cond != nil && cond.Reason == outboxv1.ReasonLastRunFailed
			ch <- prometheus.MustNewConstMetric(c.retentionError, prometheus.GaugeValue,
				boolValue(failed), rp.Namespace, rp.Name, rp.Spec.PipelineRef.Name)
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
