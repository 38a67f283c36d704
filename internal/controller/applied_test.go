package controller

import (
	"context"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// An idle pipeline sends no child applies at all once its children are applied, and a
// hand edit of a child is still put back (issue 19).
var _ = Describe("Children applied only when something changed", func() {
	It("sends no apply on idle passes, and applies the hand-edited Deployment again", func() {
		ns := newNamespace()
		dsn, _, _ := migratedDB()
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "quiet", "db"))).To(Succeed())
		Eventually(getPipeline(ns, "quiet")).Should(HaveField("Status.Workers", "0/2"))

		// A reconciler driven by hand, as after a restart (empty applied cache), whose
		// client counts the applies it sends.
		applies, counting := countingApplies()
		r := &OutboxPipelineReconciler{Client: counting, APIReader: k8sClient, Scheme: scheme,
			RelayImage: "outbox-relayworker:test", Pools: pools, applied: newAppliedCache()}
		pass := countedPass(r, client.ObjectKey{Namespace: ns, Name: "quiet"}, applies)
		Expect(pass()).To(Equal(int64(4)), "the first pass after a restart applies each child once")
		for i := range 3 {
			Expect(pass()).To(BeZero(), "idle pass %d", i+1)
		}

		By("a hand edit of the Deployment")
		key := client.ObjectKey{Namespace: ns, Name: "quiet-relay"}
		Eventually(func() error {
			var dep appsv1.Deployment
			Expect(k8sClient.Get(suiteCtx, key, &dep)).To(Succeed())
			dep.Spec.Replicas = ptr.To[int32](5)
			return k8sClient.Update(suiteCtx, &dep)
		}).Should(Succeed())
		// The manager corrects it too (it watches the Deployment); either way the live
		// resourceVersion moved, so this pass applies the Deployment and nothing else.
		Expect(pass()).To(Equal(int64(1)))
		var dep appsv1.Deployment
		Expect(k8sClient.Get(suiteCtx, key, &dep)).To(Succeed())
		Expect(*dep.Spec.Replicas).To(Equal(int32(2)), "the hand edit is corrected")
		Expect(pass()).To(BeZero(), "and the pass after is idle again")

		By("a spec change is applied")
		p := getPipeline(ns, "quiet")()
		p.Spec.Relay.Replicas = ptr.To[int32](3)
		Expect(k8sClient.Update(suiteCtx, p)).To(Succeed())
		Expect(pass()).To(BeNumerically(">=", 1))
		Expect(k8sClient.Get(suiteCtx, key, &dep)).To(Succeed())
		Expect(*dep.Spec.Replicas).To(Equal(int32(3)))
	})

	It("sends no CronJob apply on idle retention passes, and applies a hand-edited one again", func() {
		ns := newNamespace()
		dsn, _, _ := migratedDB()
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "kept", "db"))).To(Succeed())
		Expect(k8sClient.Create(suiteCtx, &outboxv1.RetentionPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
			Spec:       outboxv1.RetentionPolicySpec{PipelineRef: outboxv1.PipelineReference{Name: "kept"}},
		})).To(Succeed())
		Eventually(getPolicy(ns, "nightly")).Should(
			WithTransform(policyCondition(outboxv1.ConditionReady), Equal("True/"+outboxv1.ReasonScheduled)))

		applies, counting := countingApplies()
		r := &RetentionPolicyReconciler{Client: counting, APIReader: k8sClient, Scheme: scheme,
			RelayImage: "outbox-relayworker:test", Pools: pools, applied: newAppliedCache()}
		pass := countedPass(r, client.ObjectKey{Namespace: ns, Name: "nightly"}, applies)
		Expect(pass()).To(Equal(int64(1)), "the first pass after a restart applies the CronJob once")
		for i := range 3 {
			Expect(pass()).To(BeZero(), "idle pass %d", i+1)
		}

		By("a hand edit of the CronJob")
		key := client.ObjectKey{Namespace: ns, Name: "nightly-retention"}
		var cj batchv1.CronJob
		Eventually(func() error {
			Expect(k8sClient.Get(suiteCtx, key, &cj)).To(Succeed())
			cj.Spec.Suspend = ptr.To(true)
			return k8sClient.Update(suiteCtx, &cj)
		}).Should(Succeed())
		Expect(pass()).To(Equal(int64(1)))
		Expect(k8sClient.Get(suiteCtx, key, &cj)).To(Succeed())
		Expect(cj.Spec.Suspend).To(Or(BeNil(), HaveValue(BeFalse())), "the hand edit is corrected")
		Expect(pass()).To(BeZero(), "and the pass after is idle again")
	})
})

// countingApplies is a client to the API server that counts the applies it sends and
// passes them on unchanged.
func countingApplies() (*atomic.Int64, client.Client) {
	direct, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	var applies atomic.Int64
	return &applies, interceptor.NewClient(direct, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			applies.Add(1)
			return c.Apply(ctx, obj, opts...)
		},
	})
}

// countedPass runs one pass of r for key and returns the applies it sent.
func countedPass(r reconcile.Reconciler, key client.ObjectKey, applies *atomic.Int64) func() int64 {
	return func() int64 {
		before := applies.Load()
		_, err := r.Reconcile(suiteCtx, ctrl.Request{NamespacedName: key})
		Expect(err).NotTo(HaveOccurred())
		return applies.Load() - before
	}
}
