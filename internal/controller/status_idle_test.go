package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// An idle pipeline's status is written when something changed and never just to say it
// was read: N pipelines cost no status writes per second while nothing happens. How
// recent the last read is, the manager's metric says instead.
var _ = Describe("Idle pipeline status (issue 19)", func() {
	It("is not rewritten over several status intervals, while the read-timestamp metric moves", func() {
		ns := newNamespace()
		dsn, db, t := migratedDB()
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "idle", "db"))).To(Succeed())
		Eventually(getPipeline(ns, "idle")).Should(And(
			HaveField("Status.LastCheckTime", Not(BeNil())),
			WithTransform(conditionOf(outboxv1.ConditionDegraded), Equal("False/"+outboxv1.ReasonHealthy)),
		))
		rv := getPipeline(ns, "idle")().ResourceVersion
		firstRead := seriesValue("outbox_pipeline_status_read_timestamp_seconds", ns, "idle")()
		Expect(firstRead).To(BeNumerically(">", 0))

		By("the manager's own passes (statusInterval 5 s) over three intervals")
		Consistently(func() string { return getPipeline(ns, "idle")().ResourceVersion }, "16s", "500ms").Should(Equal(rv))
		Expect(seriesValue("outbox_pipeline_status_read_timestamp_seconds", ns, "idle")()).To(BeNumerically(">", firstRead),
			"the passes read the table, and the metric says when")

		By("passes hours apart on the reconciler's clock: no heartbeat write either")
		clock := time.Now()
		r := &OutboxPipelineReconciler{Client: k8sClient, APIReader: k8sClient, Scheme: scheme,
			RelayImage: "outbox-relayworker:test", Pools: pools, Now: func() time.Time { return clock }}
		req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "idle"}}
		for range 4 {
			clock = clock.Add(2 * time.Hour)
			_, err := r.Reconcile(suiteCtx, req)
			Expect(err).NotTo(HaveOccurred())
			Expect(getPipeline(ns, "idle")().ResourceVersion).To(Equal(rv))
			Expect(seriesValue("outbox_pipeline_status_read_timestamp_seconds", ns, "idle")()).
				To(BeNumerically("~", float64(clock.Unix()), 1))
		}

		By("a change in the table is written, with lastCheckTime")
		insertRow(db, t, "PENDING", "")
		clock = clock.Add(time.Minute)
		_, err := r.Reconcile(suiteCtx, req)
		Expect(err).NotTo(HaveOccurred())
		p := getPipeline(ns, "idle")()
		Expect(p.ResourceVersion).NotTo(Equal(rv))
		Expect(p.Status.Pending).To(Equal(int64(1)))
		Expect(p.Status.LastCheckTime.Time).To(BeTemporally("~", clock, time.Second))
	})
})
