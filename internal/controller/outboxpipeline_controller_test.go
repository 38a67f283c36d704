package controller

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

func expectOwnedBy(obj client.Object, owner client.Object) {
	refs := obj.GetOwnerReferences()
	ExpectWithOffset(1, refs).To(HaveLen(1))
	ExpectWithOffset(1, refs[0].UID).To(Equal(owner.GetUID()))
	ExpectWithOffset(1, *refs[0].Controller).To(BeTrue())
	ExpectWithOffset(1, refs[0].BlockOwnerDeletion).To(HaveValue(BeTrue()))
}

var _ = Describe("envtest smoke (issue 2)", func() {
	It("installs the CRDs and accepts a Deployment and each kind", func() {
		ns := newNamespace()
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "plain"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "plain"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
				},
			},
		}
		Expect(k8sClient.Create(suiteCtx, dep)).To(Succeed())

		p := newPipeline(ns, "smoke", "nope")
		Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())
		Expect(*p.Spec.Relay.Replicas).To(Equal(int32(2)), "defaults applied by the API server")
		Expect(p.Spec.Source.Schema).To(Equal("public"))
		Expect(p.Spec.Source.Table).To(Equal("outbox_event"))
		Expect(p.Spec.Relay.Lease.Duration).To(Equal(30 * time.Second))

		r := &outboxv1.DeadLetterReplay{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "smoke"},
			Spec: outboxv1.DeadLetterReplaySpec{
				PipelineRef: outboxv1.PipelineReference{Name: "smoke"},
				Selector:    outboxv1.ReplaySelector{EventType: "OrderPlaced"},
				Reason:      "smoke test",
			},
		}
		Expect(k8sClient.Create(suiteCtx, r)).To(Succeed())
		Expect(r.Spec.Rate).To(Equal(int32(100)))

		rp := &outboxv1.RetentionPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "smoke"},
			Spec:       outboxv1.RetentionPolicySpec{PipelineRef: outboxv1.PipelineReference{Name: "smoke"}},
		}
		Expect(k8sClient.Create(suiteCtx, rp)).To(Succeed())
		Expect(rp.Spec.Mode).To(Equal("Archive"))
		Expect(rp.Spec.SentRetention.Duration).To(Equal(168 * time.Hour))
	})
})

var _ = Describe("OutboxPipeline", func() {
	It("creates, updates and owns the relay objects; a Secret change rolls the pods", func() {
		ns := newNamespace()
		dsn, _, _ := migratedDB()
		sec := createSecret(ns, "db", map[string]string{"dsn": dsn})
		p := newPipeline(ns, "orders", "db", func(p *outboxv1.OutboxPipeline) {
			p.Spec.Sink.SASL = &outboxv1.KafkaSASL{Mechanism: "scram-sha-512",
				UsernameSecretRef: outboxv1.SecretKeyRef{Name: "kafka", Key: "user"},
				PasswordSecretRef: outboxv1.SecretKeyRef{Name: "kafka", Key: "password"}}
		})
		createSecret(ns, "kafka", map[string]string{"user": "relay", "password": "hunter2"})
		Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())

		key := client.ObjectKey{Namespace: ns, Name: "orders-relay"}
		var dep appsv1.Deployment
		Eventually(func() error { return k8sClient.Get(suiteCtx, key, &dep) }).Should(Succeed())
		expectOwnedBy(&dep, p)
		Expect(*dep.Spec.Replicas).To(Equal(int32(2)))
		podSpec := dep.Spec.Template.Spec
		Expect(*podSpec.AutomountServiceAccountToken).To(BeFalse())
		Expect(podSpec.ServiceAccountName).To(Equal("orders-relay"))
		c := podSpec.Containers[0]
		Expect(c.Image).To(Equal("outbox-relayworker:test"))
		Expect(c.Command).To(Equal([]string{"/relayworker"}))
		for _, e := range c.Env {
			Expect(e.Value).NotTo(ContainSubstring("postgres://"), "no literal DSN in %s", e.Name)
			Expect(e.Value).NotTo(ContainSubstring("hunter2"), "no literal password in %s", e.Name)
		}
		Expect(c.Env).To(ContainElement(HaveField("Name", "OUTBOX_DSN")))
		hash1 := dep.Spec.Template.Annotations[AnnotationSecretHash]
		Expect(hash1).NotTo(BeEmpty())

		var sa corev1.ServiceAccount
		Expect(k8sClient.Get(suiteCtx, key, &sa)).To(Succeed())
		expectOwnedBy(&sa, p)
		Expect(*sa.AutomountServiceAccountToken).To(BeFalse())
		var svc corev1.Service
		Expect(k8sClient.Get(suiteCtx, key, &svc)).To(Succeed())
		expectOwnedBy(&svc, p)
		var pdb policyv1.PodDisruptionBudget
		Expect(k8sClient.Get(suiteCtx, key, &pdb)).To(Succeed())
		expectOwnedBy(&pdb, p)

		By("status: no workers run in envtest, so Ready=False WorkersNotReady; the DB is fine")
		Eventually(getPipeline(ns, "orders")).Should(And(
			WithTransform(conditionOf(outboxv1.ConditionReady), Equal("False/"+outboxv1.ReasonWorkersNotReady)),
			WithTransform(conditionOf(outboxv1.ConditionDegraded), Equal("False/"+outboxv1.ReasonHealthy)),
			HaveField("Status.Workers", "0/2"),
			HaveField("Status.ObservedGeneration", p.Generation),
		))

		By("a spec change updates the Deployment")
		Eventually(func() error {
			cur := getPipeline(ns, "orders")()
			cur.Spec.Relay.Replicas = ptr.To[int32](3)
			cur.Spec.Relay.BatchSize = 200
			return k8sClient.Update(suiteCtx, cur)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, key, &dep)).To(Succeed())
			g.Expect(*dep.Spec.Replicas).To(Equal(int32(3)))
			g.Expect(dep.Spec.Template.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "RELAY_BATCH_SIZE", Value: "200"}))
		}).Should(Succeed())

		By("a Secret change rolls the pod template (picked up within statusInterval)")
		sec.StringData = map[string]string{"dsn": dsn + "&application_name=rotated"}
		Expect(k8sClient.Update(suiteCtx, sec)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, key, &dep)).To(Succeed())
			g.Expect(dep.Spec.Template.Annotations[AnnotationSecretHash]).NotTo(Equal(hash1))
		}, 20*time.Second).Should(Succeed())

		By("deletion: the pipeline goes; children carry owner references for the garbage collector")
		Expect(k8sClient.Delete(suiteCtx, p)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), &outboxv1.OutboxPipeline{}))
		}).Should(BeTrue())
	})

	It("reports counts written into a real Postgres and degrades on delay and new dead events", func() {
		ns := newNamespace()
		dsn, db, t := migratedDB()
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		p := newPipeline(ns, "stats", "db")
		Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())
		Eventually(getPipeline(ns, "stats")).Should(HaveField("Status.LastCheckTime", Not(BeNil())))

		By("an empty table shows 0, not a blank, in kubectl get: the zeros are stored")
		stored := &unstructured.Unstructured{}
		stored.SetGroupVersionKind(outboxv1.GroupVersion.WithKind("OutboxPipeline"))
		Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), stored)).To(Succeed())
		for _, f := range []string{"pending", "retrying", "dead"} {
			v, found, err := unstructured.NestedInt64(stored.Object, "status", f)
			Expect(err).NotTo(HaveOccurred())
			Expect(found).To(BeTrue(), "status.%s is missing from the stored object", f)
			Expect(v).To(BeZero())
		}

		insertRow(db, t, "PENDING", "")
		insertRow(db, t, "PENDING", "")
		insertRow(db, t, "RETRY", "retry_count = 2")
		insertRow(db, t, "DEAD", "last_error_code = 'MESSAGE_TOO_LARGE'")
		insertRow(db, t, "SENDING", "owner_token = 'w1', lease_until = now() - interval '1 minute'")
		insertRow(db, t, "SENDING", "owner_token = 'w2', lease_until = now() + interval '1 minute'")
		insertRow(db, t, "SENT", "sent_at = now()")

		Eventually(getPipeline(ns, "stats"), 20*time.Second).Should(And(
			HaveField("Status.Pending", int64(2)),
			HaveField("Status.Retrying", int64(1)),
			HaveField("Status.Dead", int64(1)),
			HaveField("Status.Sending", int64(2)),
			HaveField("Status.ExpiredLeases", int64(1)),
			HaveField("Status.LastPublishTime", Not(BeNil())),
			HaveField("Status.OldestPendingTime", Not(BeNil())),
			WithTransform(conditionOf(outboxv1.ConditionDegraded), Equal("True/"+outboxv1.ReasonDeadEventsIncreasing)),
		))

		By("an event older than the threshold degrades the pipeline with EventsDelayed")
		insertRow(db, t, "PENDING", "created_at = now() - interval '10 minutes'")
		Eventually(getPipeline(ns, "stats"), 20*time.Second).Should(And(
			HaveField("Status.Pending", int64(3)),
			WithTransform(conditionOf(outboxv1.ConditionDegraded), Equal("True/"+outboxv1.ReasonEventsDelayed)),
		))
		msg := condition(getPipeline(ns, "stats")().Status.Conditions, outboxv1.ConditionDegraded).Message
		Expect(msg).To(ContainSubstring("threshold 5m0s"))

		By("a Warning Event was recorded on the transition")
		Eventually(func() []string {
			var evs eventsv1.EventList
			Expect(k8sClient.List(suiteCtx, &evs, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, e := range evs.Items {
				if e.Regarding.Name == "stats" {
					reasons = append(reasons, e.Reason)
				}
			}
			return reasons
		}).Should(ContainElement(outboxv1.ReasonEventsDelayed))
	})

	It("says TableMissing when the outbox table does not exist", func() {
		ns := newNamespace()
		dsn, err := pgSrv.CreateDatabase(suiteCtx, "empty")
		Expect(err).NotTo(HaveOccurred())
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "notable", "db"))).To(Succeed())
		Eventually(getPipeline(ns, "notable")).Should(
			WithTransform(conditionOf(outboxv1.ConditionDegraded), Equal("True/"+outboxv1.ReasonTableMissing)))
		Expect(condition(getPipeline(ns, "notable")().Status.Conditions, outboxv1.ConditionDegraded).Message).
			To(ContainSubstring("relayworker migrate"))
	})

	It("reports a missing Secret or key as a condition and creates no Deployment until fixed", func() {
		ns := newNamespace()
		dsn, _, _ := migratedDB()
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "nosecret", "db"))).To(Succeed())
		Eventually(getPipeline(ns, "nosecret")).Should(
			WithTransform(conditionOf(outboxv1.ConditionReady), Equal("False/"+outboxv1.ReasonSecretNotFound)))
		c := condition(getPipeline(ns, "nosecret")().Status.Conditions, outboxv1.ConditionReady)
		Expect(c.Message).To(ContainSubstring(`Secret "db" referenced by spec.source.dsnSecretRef was not found in namespace "` + ns + `"`))
		key := client.ObjectKey{Namespace: ns, Name: "nosecret-relay"}
		Consistently(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(suiteCtx, key, &appsv1.Deployment{}))
		}, 2*time.Second).Should(BeTrue())

		By("wrong key")
		sec := createSecret(ns, "db", map[string]string{"url": dsn})
		Eventually(getPipeline(ns, "nosecret"), 20*time.Second).Should(
			WithTransform(conditionOf(outboxv1.ConditionReady), Equal("False/"+outboxv1.ReasonSecretKeyNotFound)))
		Expect(condition(getPipeline(ns, "nosecret")().Status.Conditions, outboxv1.ConditionReady).Message).
			To(ContainSubstring(`keys present: [url]`))

		By("fixed")
		sec.StringData = map[string]string{"dsn": dsn}
		Expect(k8sClient.Update(suiteCtx, sec)).To(Succeed())
		Eventually(func() error { return k8sClient.Get(suiteCtx, key, &appsv1.Deployment{}) }, 20*time.Second).Should(Succeed())
		Eventually(getPipeline(ns, "nosecret")).Should(
			WithTransform(conditionOf(outboxv1.ConditionReady), Equal("False/"+outboxv1.ReasonWorkersNotReady)))
	})

	It("cannot use a Secret of another namespace", func() {
		ns, other := newNamespace(), newNamespace()
		dsn, _, _ := migratedDB()
		createSecret(other, "shared-db", map[string]string{"dsn": dsn})
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "thief", "shared-db"))).To(Succeed())
		Eventually(getPipeline(ns, "thief")).Should(
			WithTransform(conditionOf(outboxv1.ConditionReady), Equal("False/"+outboxv1.ReasonSecretNotFound)))
		Consistently(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "thief-relay"}, &appsv1.Deployment{}))
		}, 2*time.Second).Should(BeTrue())
	})

	It("degrades on an unreachable database without leaking the DSN, and other pipelines keep going", func() {
		ns := newNamespace()
		createSecret(ns, "down", map[string]string{"dsn": "postgres://relay:s3cretpw@127.0.0.1:1/app?sslmode=disable"})
		dsn, db, t := migratedDB()
		createSecret(ns, "up", map[string]string{"dsn": dsn})
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "down", "down"))).To(Succeed())
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "up", "up"))).To(Succeed())

		Eventually(getPipeline(ns, "down")).Should(And(
			WithTransform(conditionOf(outboxv1.ConditionDegraded), Equal("True/"+outboxv1.ReasonDatabaseUnreachable)),
			WithTransform(conditionOf(outboxv1.ConditionReady), Equal("False/"+outboxv1.ReasonDatabaseUnreachable)),
		))
		down := getPipeline(ns, "down")()
		for _, c := range down.Status.Conditions {
			Expect(c.Message).NotTo(ContainSubstring("s3cretpw"))
		}
		Expect(condition(down.Status.Conditions, outboxv1.ConditionDegraded).Message).To(ContainSubstring(`Secret "down" key "dsn"`))
		// The relay Deployment still exists: workers retry the database themselves.
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "down-relay"}, &appsv1.Deployment{})).To(Succeed())

		insertRow(db, t, "PENDING", "")
		Eventually(getPipeline(ns, "up"), 20*time.Second).Should(HaveField("Status.Pending", int64(1)))
	})
})

var _ = strings.Contains
