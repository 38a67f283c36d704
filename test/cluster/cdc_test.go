package cluster

import (
	"context"
	"database/sql"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

var _ = Describe("a LogicalReplication pipeline on a real node", Ordered, func() {
	const cdcNS = "pay"
	var (
		ctx      = context.Background()
		db       *sql.DB
		pipeline outboxv1.OutboxPipeline
		payments *arrivals
	)

	BeforeAll(func() {
		db = applyTenant(ctx, cdcNS, "outbox_v1alpha1_outboxpipeline_logicalreplication.yaml", &pipeline)
		cctx, cancel := context.WithCancel(ctx)
		DeferCleanup(cancel)
		payments = consume(cctx, "payments")
	})

	It("streams from the slot the operator made, and delivers every event in order", func() {
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: cdcNS, Name: "payments-relay"}, &appsv1.Deployment{})
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
		Expect(stack.RolloutStatus(cdcNS, "payments-relay", 3*time.Minute)).To(Succeed())
		var before string
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&pipeline), &pipeline)).To(Succeed())
			rs := pipeline.Status.Replication
			g.Expect(rs).NotTo(BeNil())
			g.Expect(rs.Exists).To(BeTrue())
			g.Expect(rs.Active).To(BeTrue(), "no relay pod streams from the slot")
			before = rs.ConfirmedLSN
		}, 2*time.Minute, time.Second).Should(Succeed())

		ids, err := produce(ctx, db, "payments", "pay", 20, 10, 2*time.Millisecond)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() []string { return payments.missing(ids) }, 90*time.Second, 500*time.Millisecond).Should(BeEmpty())
		Expect(payments.orderViolations()).To(BeEmpty())
		// The slot moved past the stream: the reader confirmed what it marked.
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&pipeline), &pipeline)).To(Succeed())
			g.Expect(pipeline.Status.Replication.ConfirmedLSN).NotTo(Equal(before))
			g.Expect(pipeline.Status.Pending).To(BeZero())
		}, time.Minute, time.Second).Should(Succeed())
		// Claimed from the stream, not by polling after the hand-over age: the events
		// reached Kafka within seconds of their commit.
		var slow int
		Expect(db.QueryRow(`SELECT count(*) FROM outbox_event WHERE sent_at - created_at > interval '4 seconds'`).Scan(&slow)).To(Succeed())
		Expect(slow).To(BeZero(), "events waited for polling's hand-over")
	})

	It("drops the slot and the publication when the pipeline is deleted", func() {
		slot := pipeline.Status.Replication.Slot
		Expect(k8s.Delete(ctx, &pipeline)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(&pipeline), &outboxv1.OutboxPipeline{}))
		}, 2*time.Minute, time.Second).Should(BeTrue())
		var slots, pubs int
		Expect(db.QueryRow(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&slots)).To(Succeed())
		Expect(db.QueryRow(`SELECT count(*) FROM pg_publication WHERE pubname = $1`, slot).Scan(&pubs)).To(Succeed())
		Expect([]int{slots, pubs}).To(Equal([]int{0, 0}), "slot %s or its publication outlived the pipeline", slot)
		// No relay pod is left to bring the slot back.
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(cdcNS))).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
		}, 2*time.Minute, time.Second).Should(Succeed())
		Expect(db.QueryRow(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&slots)).To(Succeed())
		Expect(slots).To(BeZero())
	})
})
