package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

func getPolicy(ns, name string) func() *outboxv1.RetentionPolicy {
	return func() *outboxv1.RetentionPolicy {
		var rp outboxv1.RetentionPolicy
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: name}, &rp)).To(Succeed())
		return &rp
	}
}

func policyCondition(typ string) func(*outboxv1.RetentionPolicy) string {
	return func(rp *outboxv1.RetentionPolicy) string {
		c := condition(rp.Status.Conditions, typ)
		return string(c.Status) + "/" + c.Reason
	}
}

// touchCronJob changes the CronJob's status the way the CronJob controller does when a
// run starts or ends (envtest runs no CronJob controller), which wakes the reconciler.
func touchCronJob(ns, name string, mut func(*batchv1.CronJobStatus)) {
	var cj batchv1.CronJob
	Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: name}, &cj)).To(Succeed())
	mut(&cj.Status)
	Expect(k8sClient.Status().Update(suiteCtx, &cj)).To(Succeed())
}

var _ = Describe("RetentionPolicy run history", func() {
	It("shows the newest run the worker recorded, and a failed one as Degraded/LastRunFailed", func() {
		ns := newNamespace()
		dsn, db, table := migratedDB()
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "orders", "db"))).To(Succeed())
		Expect(k8sClient.Create(suiteCtx, &outboxv1.RetentionPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep"},
			Spec:       outboxv1.RetentionPolicySpec{PipelineRef: outboxv1.PipelineReference{Name: "orders"}},
		})).To(Succeed())

		By("no run yet: counts empty, not zero")
		Eventually(getPolicy(ns, "keep")).Should(And(
			WithTransform(policyCondition(outboxv1.ConditionReady), Equal("True/"+outboxv1.ReasonScheduled)),
			WithTransform(policyCondition(outboxv1.ConditionDegraded), Equal("False/"+outboxv1.ReasonNoRunsYet)),
		))
		Expect(getPolicy(ns, "keep")().Status.LastSentArchived).To(BeNil())
		var cj batchv1.CronJob
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "keep-retention"}, &cj)).To(Succeed())
		Expect(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--policy=" + ns + "/keep"))

		runs := table.WithSuffix(schema.ArchiveRunsSuffix).Qualified()
		insertRun := func(sent, dead, consumer int64, errText any) {
			_, err := db.Exec(`INSERT INTO `+runs+` (policy, mode, started_at, finished_at, sent_moved, dead_moved, consumer_log_trimmed, error)
				VALUES ($1, 'archive', now() - interval '3 seconds', now(), $2, $3, $4, $5)`, ns+"/keep", sent, dead, consumer, errText)
			Expect(err).NotTo(HaveOccurred())
		}
		// Another policy's run in the same table is not ours.
		_, err := db.Exec(`INSERT INTO ` + runs + ` (policy, mode, started_at, sent_moved) VALUES ('elsewhere/keep', 'delete', now() + interval '1 hour', 999)`)
		Expect(err).NotTo(HaveOccurred())

		By("a successful run shows its counts once the CronJob reports the Job finished")
		insertRun(12, 3, 4, nil)
		touchCronJob(ns, "keep-retention", func(s *batchv1.CronJobStatus) { s.LastSuccessfulTime = &metav1.Time{Time: time.Now()} })
		Eventually(getPolicy(ns, "keep")).Should(And(
			HaveField("Status.LastSentArchived", HaveValue(Equal(int64(12)))),
			HaveField("Status.LastDeadArchived", HaveValue(Equal(int64(3)))),
			HaveField("Status.LastConsumerLogTrimmed", HaveValue(Equal(int64(4)))),
			HaveField("Status.LastArchiveTime", Not(BeNil())),
			HaveField("Status.LastRunError", BeEmpty()),
			WithTransform(policyCondition(outboxv1.ConditionDegraded), Equal("False/"+outboxv1.ReasonLastRunSucceeded)),
		))

		By("a run that failed part-way: its counts so far, its error, Degraded=True; still Ready")
		insertRun(5, 0, 0, "archive DEAD rows: pq: canceling statement due to statement timeout")
		touchCronJob(ns, "keep-retention", func(s *batchv1.CronJobStatus) { s.LastScheduleTime = &metav1.Time{Time: time.Now()} })
		Eventually(getPolicy(ns, "keep")).Should(And(
			HaveField("Status.LastSentArchived", HaveValue(Equal(int64(5)))),
			HaveField("Status.LastDeadArchived", HaveValue(Equal(int64(0)))),
			HaveField("Status.LastRunError", Equal("archive DEAD rows: pq: canceling statement due to statement timeout")),
			WithTransform(policyCondition(outboxv1.ConditionDegraded), Equal("True/"+outboxv1.ReasonLastRunFailed)),
			WithTransform(policyCondition(outboxv1.ConditionReady), Equal("True/"+outboxv1.ReasonScheduled)),
		))
		Expect(condition(getPolicy(ns, "keep")().Status.Conditions, outboxv1.ConditionDegraded).Message).
			To(ContainSubstring("statement timeout"))
	})

	It("keeps the CronJob reconciled when the pipeline's database is unreachable", func() {
		ns := newNamespace()
		createSecret(ns, "down", map[string]string{"dsn": "postgres://relay:s3cretpw@127.0.0.1:1/app?sslmode=disable"})
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "orders", "down"))).To(Succeed())
		Expect(k8sClient.Create(suiteCtx, &outboxv1.RetentionPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep"},
			Spec:       outboxv1.RetentionPolicySpec{PipelineRef: outboxv1.PipelineReference{Name: "orders"}},
		})).To(Succeed())
		Eventually(getPolicy(ns, "keep")).Should(And(
			HaveField("Status.CronJobName", "keep-retention"),
			HaveField("Status.NextRunTime", Not(BeNil())),
			WithTransform(policyCondition(outboxv1.ConditionReady), Equal("True/"+outboxv1.ReasonScheduled)),
			WithTransform(policyCondition(outboxv1.ConditionDegraded), Equal("Unknown/"+outboxv1.ReasonDatabaseUnreachable)),
		))
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "keep-retention"}, &batchv1.CronJob{})).To(Succeed())
		Expect(condition(getPolicy(ns, "keep")().Status.Conditions, outboxv1.ConditionDegraded).Message).NotTo(ContainSubstring("s3cretpw"))
	})
})

var _ = Describe("RetentionPolicy", func() {
	It("renders the retention CronJob", func() {
		ns := newNamespace()
		dsn, _, _ := migratedDB()
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "orders", "db"))).To(Succeed())
		rp := &outboxv1.RetentionPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
			Spec:       outboxv1.RetentionPolicySpec{PipelineRef: outboxv1.PipelineReference{Name: "orders"}, Mode: "Delete"},
		}
		Expect(k8sClient.Create(suiteCtx, rp)).To(Succeed())
		var cj batchv1.CronJob
		Eventually(func() error {
			return k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "orders-retention"}, &cj)
		}).Should(Succeed())
		expectOwnedBy(&cj, rp)
		Expect(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--mode=delete"))
		Eventually(func(g Gomega) {
			var cur outboxv1.RetentionPolicy
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(rp), &cur)).To(Succeed())
			g.Expect(cur.Status.NextRunTime).NotTo(BeNil())
			g.Expect(condition(cur.Status.Conditions, outboxv1.ConditionReady).Reason).To(Equal(outboxv1.ReasonScheduled))
		}).Should(Succeed())
	})

	It("reports PipelineNotFound for a retention policy naming a missing pipeline", func() {
		ns := newNamespace()
		rp := &outboxv1.RetentionPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ghost"},
			Spec:       outboxv1.RetentionPolicySpec{PipelineRef: outboxv1.PipelineReference{Name: "ghost"}},
		}
		Expect(k8sClient.Create(suiteCtx, rp)).To(Succeed())
		Eventually(func() string {
			var cur outboxv1.RetentionPolicy
			Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(rp), &cur)).To(Succeed())
			return condition(cur.Status.Conditions, outboxv1.ConditionReady).Reason
		}).Should(Equal(outboxv1.ReasonPipelineNotFound))
	})
})
