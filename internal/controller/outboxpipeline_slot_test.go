package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/contract"
)

var _ = Describe("a LogicalReplication pipeline's slot", func() {
	It("shows the slot's lag, is Degraded past maxSlotLag, and drops slot and publication when deleted", func() {
		ns := newNamespace()
		dsn, db, table := migratedDB()
		DeferCleanup(db.Close)
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		p := newPipeline(ns, "cdc", "db", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Source.Mode = outboxv1.SourceLogicalReplication
			small := resource.MustParse("1Ki")
			p.Spec.Source.MaxSlotLag = &small
		})
		Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())
		slot := ReplicationSlot(p)

		// The relay renders the mode; the finalizer is there before any slot can be.
		Eventually(func(g Gomega) {
			var d appsv1.Deployment
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "cdc-relay"}, &d)).To(Succeed())
			e := envMap(d.Spec.Template.Spec.Containers[0])
			g.Expect(e[contract.EnvSourceMode].Value).To(Equal(contract.SourceLogicalReplication))
			g.Expect(e[contract.EnvSlot].Value).To(Equal(slot))
			g.Expect(e[contract.EnvCreateSlot].Value).To(Equal("false"))
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(controllerutil.ContainsFinalizer(p, SlotFinalizer)).To(BeTrue())
		}, 20*time.Second, 200*time.Millisecond).Should(Succeed())

		// The operator makes the slot (workers only stream). No worker runs here, so WAL
		// piles up behind it.
		Eventually(func(g Gomega) {
			var slots, pubs int
			g.Expect(db.QueryRow(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&slots)).To(Succeed())
			g.Expect(db.QueryRow(`SELECT count(*) FROM pg_publication WHERE pubname = $1`, slot).Scan(&pubs)).To(Succeed())
			g.Expect([]int{slots, pubs}).To(Equal([]int{1, 1}))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		for i := 0; i < 50; i++ {
			insertRow(db, table, "SENT", "")
		}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			rs := p.Status.Replication
			g.Expect(rs).NotTo(BeNil())
			g.Expect(rs.Exists).To(BeTrue())
			g.Expect(rs.Active).To(BeFalse())
			g.Expect(rs.LagBytes).To(BeNumerically(">", 1024))
			g.Expect(rs.ConfirmedLSN).NotTo(BeEmpty())
			g.Expect(rs.WALStatus).To(Equal("reserved"))
			c := condition(p.Status.Conditions, outboxv1.ConditionDegraded)
			g.Expect(c.Reason).To(Equal(outboxv1.ReasonSlotLagging))
			g.Expect(c.Message).To(ContainSubstring(slot))
		}, 30*time.Second, 500*time.Millisecond).Should(Succeed())

		Expect(k8sClient.Delete(suiteCtx, p)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), &outboxv1.OutboxPipeline{}))
		}, 30*time.Second, 200*time.Millisecond).Should(BeTrue())
		var slots, pubs int
		Expect(db.QueryRow(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&slots)).To(Succeed())
		Expect(db.QueryRow(`SELECT count(*) FROM pg_publication WHERE pubname = $1`, slot).Scan(&pubs)).To(Succeed())
		Expect(slots).To(BeZero(), "the slot outlived its pipeline")
		Expect(pubs).To(BeZero(), "the publication outlived its pipeline")
	})

	It("drops the slot when the pipeline goes back to Polling, then lets the finalizer go", func() {
		ns := newNamespace()
		dsn, db, _ := migratedDB()
		DeferCleanup(db.Close)
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		p := newPipeline(ns, "back", "db", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Source.Mode = outboxv1.SourceLogicalReplication
		})
		Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())
		slot := ReplicationSlot(p)
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(p.Status.Replication).NotTo(BeNil())
			g.Expect(p.Status.Replication.Exists).To(BeTrue())
			g.Expect(condition(p.Status.Conditions, outboxv1.ConditionDegraded).Reason).To(Equal(outboxv1.ReasonHealthy))
		}, 30*time.Second, 500*time.Millisecond).Should(Succeed())

		patch := client.MergeFrom(p.DeepCopy())
		p.Spec.Source.Mode = outboxv1.SourcePolling
		Expect(k8sClient.Patch(suiteCtx, p, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(p.Status.Replication).To(BeNil())
			g.Expect(controllerutil.ContainsFinalizer(p, SlotFinalizer)).To(BeFalse())
			var slots int
			g.Expect(db.QueryRow(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&slots)).To(Succeed())
			g.Expect(slots).To(BeZero())
		}, 30*time.Second, 500*time.Millisecond).Should(Succeed())
	})
})

var _ = Describe("maxSlotLag", func() {
	It("refuses a lag that is not positive with InvalidSpec, naming the field", func() {
		ns := newNamespace()
		createSecret(ns, "db", map[string]string{"dsn": "postgres://x@127.0.0.1:1/x?sslmode=disable"})
		p := newPipeline(ns, "neg", "db", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Source.Mode = outboxv1.SourceLogicalReplication
			q := resource.MustParse("-1Gi")
			p.Spec.Source.MaxSlotLag = &q
		})
		Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			c := condition(p.Status.Conditions, outboxv1.ConditionReady)
			g.Expect(c.Reason).To(Equal(outboxv1.ReasonInvalidSpec))
			g.Expect(c.Message).To(ContainSubstring("spec.source.maxSlotLag -1Gi must be positive"))
		}, 20*time.Second, 200*time.Millisecond).Should(Succeed())
	})
})
