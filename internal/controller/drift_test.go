package controller

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// The children are applied server-side on every pass: what someone changes by hand
// is put back, an unchanged child is not written, and a foreign object is never
// taken over.
var _ = Describe("OutboxPipeline children (server-side apply)", func() {
	// runningPipeline creates a pipeline with a reachable database and waits for its
	// first full pass.
	runningPipeline := func(name string) (string, *outboxv1.OutboxPipeline, client.ObjectKey) {
		ns := newNamespace()
		dsn, _, _ := migratedDB()
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		p := newPipeline(ns, name, "db")
		Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())
		Eventually(getPipeline(ns, name)).Should(And(
			HaveField("Status.Workers", "0/2"),
			WithTransform(conditionOf(outboxv1.ConditionDegraded), Equal("False/"+outboxv1.ReasonHealthy)),
		))
		return ns, p, client.ObjectKey{Namespace: ns, Name: name + "-relay"}
	}

	It("puts back the replicas and image of a hand-edited Deployment", func() {
		_, _, key := runningPipeline("drift")
		Eventually(func() error {
			var dep appsv1.Deployment
			Expect(k8sClient.Get(suiteCtx, key, &dep)).To(Succeed())
			dep.Spec.Replicas = ptr.To[int32](5)
			dep.Spec.Template.Spec.Containers[0].Image = "someone/else:1"
			return k8sClient.Update(suiteCtx, &dep)
		}).Should(Succeed())

		Eventually(func(g Gomega) {
			var dep appsv1.Deployment
			g.Expect(k8sClient.Get(suiteCtx, key, &dep)).To(Succeed())
			g.Expect(*dep.Spec.Replicas).To(Equal(int32(2)))
			g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal("outbox-relayworker:test"))
		}).Should(Succeed())
	})

	It("recreates a deleted metrics Service", func() {
		_, p, key := runningPipeline("svc")
		var svc corev1.Service
		Expect(k8sClient.Get(suiteCtx, key, &svc)).To(Succeed())
		oldUID := svc.UID
		Expect(k8sClient.Delete(suiteCtx, &svc)).To(Succeed())

		Eventually(func(g Gomega) {
			var cur corev1.Service
			g.Expect(k8sClient.Get(suiteCtx, key, &cur)).To(Succeed())
			g.Expect(cur.UID).NotTo(Equal(oldUID))
			g.Expect(cur.Spec.Ports).To(ConsistOf(HaveField("Name", "metrics")))
		}).Should(Succeed())
		Expect(k8sClient.Get(suiteCtx, key, &svc)).To(Succeed())
		expectOwnedBy(&svc, getPipeline(p.Namespace, p.Name)())
	})

	It("writes nothing when nothing changed: two passes in a row keep every child's resourceVersion", func() {
		ns, _, key := runningPipeline("steady")
		versions := func() map[string]string {
			out := map[string]string{}
			for kind, obj := range map[string]client.Object{
				"Deployment": &appsv1.Deployment{}, "Service": &corev1.Service{},
				"ServiceAccount": &corev1.ServiceAccount{}, "PodDisruptionBudget": &policyv1.PodDisruptionBudget{},
			} {
				Expect(k8sClient.Get(suiteCtx, key, obj)).To(Succeed())
				out[kind] = obj.GetResourceVersion()
			}
			return out
		}
		before := versions()

		// A second reconciler with the same image, driven by hand: each call is one
		// full pass, applied as the same field owner as the manager's.
		r := &OutboxPipelineReconciler{Client: k8sClient, APIReader: k8sClient, Scheme: scheme,
			RelayImage: "outbox-relayworker:test", Pools: pools}
		req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "steady"}}
		for range 2 {
			_, err := r.Reconcile(suiteCtx, req)
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(versions()).To(Equal(before))
	})

	It("moves a child created by an earlier operator version to server-side apply and drops its desired-hash", func() {
		ns := newNamespace()
		dsn, _, _ := migratedDB()
		p := newPipeline(ns, "old", "db")
		Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())
		Eventually(getPipeline(ns, "old")).Should(
			WithTransform(conditionOf(outboxv1.ConditionReady), Equal("False/"+outboxv1.ReasonSecretNotFound)))

		By("a Deployment as the operator created it before: Create under the same field owner, with a desired-hash")
		old := DesiredDeployment(p.WithDefaults(), "outbox-relayworker:test", "stale")
		old.Annotations = map[string]string{"outbox.dev/desired-hash": "0123456789abcdef"}
		old.Spec.Template.Spec.Containers[0].Env = append(old.Spec.Template.Spec.Containers[0].Env,
			corev1.EnvVar{Name: "RELAY_REMOVED_SETTING", Value: "1"})
		Expect(controllerutil.SetControllerReference(p, old, scheme)).To(Succeed())
		Expect(k8sClient.Create(suiteCtx, old, client.FieldOwner(FieldOwner))).To(Succeed())

		createSecret(ns, "db", map[string]string{"dsn": dsn})
		Eventually(func(g Gomega) {
			var dep appsv1.Deployment
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(old), &dep)).To(Succeed())
			g.Expect(dep.Annotations).NotTo(HaveKey("outbox.dev/desired-hash"))
			g.Expect(dep.Spec.Template.Annotations[AnnotationSecretHash]).NotTo(Equal("stale"))
			g.Expect(dep.Spec.Template.Spec.Containers[0].Env).NotTo(ContainElement(HaveField("Name", "RELAY_REMOVED_SETTING")))
			g.Expect(dep.ManagedFields).NotTo(ContainElement(And(
				HaveField("Manager", FieldOwner), HaveField("Operation", metav1.ManagedFieldsOperationUpdate))))
		}).Should(Succeed())
	})

	It("replaces a metrics Service an earlier operator version made with a cluster IP by a headless one", func() {
		ns := newNamespace()
		dsn, _, _ := migratedDB()
		p := newPipeline(ns, "addr", "db")
		Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())
		Eventually(getPipeline(ns, "addr")).Should(
			WithTransform(conditionOf(outboxv1.ConditionReady), Equal("False/"+outboxv1.ReasonSecretNotFound)))

		By("the Service as the operator applied it before: type ClusterIP, an address allocated")
		old := DesiredService(p.WithDefaults())
		old.Spec.ClusterIP = ""
		Expect(controllerutil.SetControllerReference(p, old, scheme)).To(Succeed())
		Expect(k8sClient.Create(suiteCtx, old, client.FieldOwner(FieldOwner))).To(Succeed())
		Expect(old.Spec.ClusterIP).NotTo(BeElementOf("", corev1.ClusterIPNone))

		createSecret(ns, "db", map[string]string{"dsn": dsn})
		Eventually(func(g Gomega) {
			var cur corev1.Service
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(old), &cur)).To(Succeed())
			g.Expect(cur.UID).NotTo(Equal(old.UID))
			g.Expect(cur.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
			g.Expect(cur.Spec.Ports).To(ConsistOf(HaveField("Name", "metrics")))
		}).Should(Succeed())
		Eventually(getPipeline(ns, "addr")).Should(
			WithTransform(conditionOf(outboxv1.ConditionDegraded), Equal("False/"+outboxv1.ReasonHealthy)))
	})

	It("does not take over a same-named object it does not control", func() {
		ns := newNamespace()
		dsn, _, _ := migratedDB()
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		foreign := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken-relay"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "web", Port: 80}}},
		}
		Expect(k8sClient.Create(suiteCtx, foreign)).To(Succeed())
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "taken", "db"))).To(Succeed())

		Eventually(getPipeline(ns, "taken")).Should(
			WithTransform(conditionOf(outboxv1.ConditionReady), Equal("False/"+outboxv1.ReasonNameConflict)))
		Expect(condition(getPipeline(ns, "taken")().Status.Conditions, outboxv1.ConditionReady).Message).
			To(ContainSubstring(`a Service named "taken-relay" already exists in namespace "` + ns + `"`))
		var svc corev1.Service
		Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(foreign), &svc)).To(Succeed())
		Expect(svc.OwnerReferences).To(BeEmpty())
		Expect(svc.Spec.Ports).To(ConsistOf(HaveField("Name", "web")))
		Expect(svc.Labels).NotTo(HaveKey(LabelManagedBy))
		// Every pass stops at the conflict, before the Deployment (applied last).
		err := k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "taken-relay"}, &appsv1.Deployment{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Deployment: %v", err)
	})

	It("puts back the schedule and image of a hand-edited retention CronJob", func() {
		ns, _, _ := runningPipeline("kept")
		Expect(k8sClient.Create(suiteCtx, &outboxv1.RetentionPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
			Spec:       outboxv1.RetentionPolicySpec{PipelineRef: outboxv1.PipelineReference{Name: "kept"}},
		})).To(Succeed())
		key := client.ObjectKey{Namespace: ns, Name: "nightly-retention"}
		var cj batchv1.CronJob
		Eventually(func() error { return k8sClient.Get(suiteCtx, key, &cj) }).Should(Succeed())
		schedule := cj.Spec.Schedule
		Eventually(func() error {
			Expect(k8sClient.Get(suiteCtx, key, &cj)).To(Succeed())
			cj.Spec.Schedule = "*/1 * * * *"
			cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image = "someone/else:1"
			return k8sClient.Update(suiteCtx, &cj)
		}).Should(Succeed())

		Eventually(func(g Gomega) {
			var cur batchv1.CronJob
			g.Expect(k8sClient.Get(suiteCtx, key, &cur)).To(Succeed())
			g.Expect(cur.Spec.Schedule).To(Equal(schedule))
			g.Expect(cur.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image).To(Equal("outbox-relayworker:test"))
		}).Should(Succeed())
	})
})
