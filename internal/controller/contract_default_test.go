package controller

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// The CRD defaults spec.source.contract to v2 for new pipelines (issue 21). A default
// is written into the object when it is created, so a pipeline created while the
// default was v1 has `contract: v1` stored like one that set it, and keeps it.
var _ = Describe("spec.source.contract default", func() {
	It("makes an omitted contract v2 and keeps a stored v1 through patches and updates", func() {
		ns := newNamespace()
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "fresh", "db", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Source.Contract = ""
		}))).To(Succeed())
		Expect(getPipeline(ns, "fresh")().Spec.Source.Contract).To(Equal(outboxv1.ContractV2))

		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "old", "db", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Source.Contract = outboxv1.ContractV1
		}))).To(Succeed())
		p := getPipeline(ns, "old")()
		Expect(p.Spec.Source.Contract).To(Equal(outboxv1.ContractV1))

		By("a merge patch of another field leaves the stored v1 alone")
		base := p.DeepCopy()
		p.Spec.Relay.BatchSize = 123
		Expect(k8sClient.Patch(suiteCtx, p, client.MergeFrom(base))).To(Succeed())
		Expect(getPipeline(ns, "old")().Spec.Source.Contract).To(Equal(outboxv1.ContractV1))

		// The controller writes the object too (a finalizer): an update retries on a conflict.
		update := func(mut func(*outboxv1.OutboxPipeline)) {
			Eventually(func() error {
				p := getPipeline(ns, "old")()
				mut(p)
				return k8sClient.Update(suiteCtx, p)
			}).Should(Succeed())
		}
		By("an update of the object as read keeps v1")
		update(func(p *outboxv1.OutboxPipeline) { p.Spec.Relay.BatchSize = 124 })
		Expect(getPipeline(ns, "old")().Spec.Source.Contract).To(Equal(outboxv1.ContractV1))

		By("an update (PUT) of a manifest without the field sets v2, as the field's doc warns")
		update(func(p *outboxv1.OutboxPipeline) { p.Spec.Source.Contract = "" })
		Expect(getPipeline(ns, "old")().Spec.Source.Contract).To(Equal(outboxv1.ContractV2))
	})

	It("accepts LogicalReplication with contract v1", func() {
		ns := newNamespace()
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "cdc", "db", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Source.Contract, p.Spec.Source.Mode = outboxv1.ContractV1, outboxv1.SourceLogicalReplication
		}))).To(Succeed())
	})
})
