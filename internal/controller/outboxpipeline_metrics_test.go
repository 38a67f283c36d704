package controller

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// pipelineSeries reads one outbox_pipeline_* series from controller-runtime's
// registry, the one the manager serves; found is false when the series is absent.
func pipelineSeries(name, ns, pipeline string) (float64, bool) {
	mfs, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == ns && labels["pipeline"] == pipeline {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

func seriesValue(name, ns, pipeline string) func() float64 {
	return func() float64 {
		v, ok := pipelineSeries(name, ns, pipeline)
		if !ok {
			return -1
		}
		return v
	}
}

var _ = Describe("OutboxPipeline metrics", func() {
	It("exports the table's counts per pipeline, drops them while the table is unreadable, and deletes them with the pipeline", func() {
		ns := newNamespace()
		dsn, db, t := migratedDB()
		sec := createSecret(ns, "db", map[string]string{"dsn": dsn})
		insertRow(db, t, "PENDING", "created_at = now() - interval '10 minutes'")
		insertRow(db, t, "PENDING", "")
		insertRow(db, t, "RETRY", "retry_count = 1")
		insertRow(db, t, "DEAD", "last_error_code = 'MESSAGE_TOO_LARGE'")
		insertRow(db, t, "SENDING", "owner_token = 'w1', lease_until = now() - interval '1 minute'")
		p := newPipeline(ns, "metered", "db")
		Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())

		Eventually(seriesValue("outbox_pipeline_pending", ns, "metered"), 20*time.Second).Should(Equal(2.0))
		Expect(seriesValue("outbox_pipeline_retrying", ns, "metered")()).To(Equal(1.0))
		Expect(seriesValue("outbox_pipeline_dead", ns, "metered")()).To(Equal(1.0))
		Expect(seriesValue("outbox_pipeline_sending", ns, "metered")()).To(Equal(1.0))
		Expect(seriesValue("outbox_pipeline_expired_leases", ns, "metered")()).To(Equal(1.0))
		Expect(seriesValue("outbox_pipeline_database_reachable", ns, "metered")()).To(Equal(1.0))
		Expect(seriesValue("outbox_pipeline_oldest_pending_age_seconds", ns, "metered")()).To(BeNumerically(">=", 590))
		Expect(seriesValue("outbox_pipeline_workers_desired", ns, "metered")()).To(BeNumerically(">=", 1))
		Expect(seriesValue("outbox_pipeline_workers_ready", ns, "metered")()).To(Equal(0.0), "envtest runs no pods")
		Expect(seriesValue("outbox_pipeline_status_interval_seconds", ns, "metered")()).To(Equal(5.0))

		By("an unreachable database: reachable 0, and no stale counts")
		sec.StringData = map[string]string{"dsn": "postgres://u@127.0.0.1:1/db?sslmode=disable&connect_timeout=1"}
		Expect(k8sClient.Update(suiteCtx, sec)).To(Succeed())
		Eventually(seriesValue("outbox_pipeline_database_reachable", ns, "metered"), 30*time.Second).Should(Equal(0.0))
		Expect(seriesValue("outbox_pipeline_pending", ns, "metered")()).To(Equal(-1.0), "pending must be absent, not stale")

		By("deletion removes every series of the pipeline")
		Expect(k8sClient.Delete(suiteCtx, p)).To(Succeed())
		Eventually(seriesValue("outbox_pipeline_database_reachable", ns, "metered"), 20*time.Second).Should(Equal(-1.0))
		Expect(seriesValue("outbox_pipeline_workers_desired", ns, "metered")()).To(Equal(-1.0))
		Expect(seriesValue("outbox_pipeline_status_interval_seconds", ns, "metered")()).To(Equal(-1.0))
	})
})

// The replay and retention gauges come from the status at scrape time.
func TestResourceCollector(t *testing.T) {
	s := runtime.NewScheme()
	if err := outboxv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	ref := outboxv1.PipelineReference{Name: "orders"}
	objs := []client.Object{
		&outboxv1.DeadLetterReplay{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "bad"},
			Spec: outboxv1.DeadLetterReplaySpec{PipelineRef: ref}, Status: outboxv1.DeadLetterReplayStatus{Phase: outboxv1.ReplayFailed}},
		&outboxv1.DeadLetterReplay{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "ok"},
			Spec: outboxv1.DeadLetterReplaySpec{PipelineRef: ref}, Status: outboxv1.DeadLetterReplayStatus{Phase: "Succeeded"}},
		&outboxv1.RetentionPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "nightly"},
			Spec: outboxv1.RetentionPolicySpec{PipelineRef: ref}, Status: outboxv1.RetentionPolicyStatus{Conditions: []metav1.Condition{{
				Type: outboxv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: outboxv1.ReasonLastRunFailed}}}},
		&outboxv1.RetentionPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "fine"},
			Spec: outboxv1.RetentionPolicySpec{PipelineRef: ref}},
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewResourceCollector(c))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"outbox_replay_failed namespace=shop pipeline=orders replay=bad":                 1,
		"outbox_replay_failed namespace=shop pipeline=orders replay=ok":                  0,
		"outbox_retention_last_run_failed namespace=shop pipeline=orders policy=fine":    0,
		"outbox_retention_last_run_failed namespace=shop pipeline=orders policy=nightly": 1,
	}
	if len(got) != len(want) {
		t.Errorf("got %d series, want %d: %v", len(got), len(want), got)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}
