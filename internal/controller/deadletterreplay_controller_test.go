package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

var _ = Describe("DeadLetterReplay", func() {
	It("reports a missing pipeline, then starts the Job when it appears and freezes the spec", func() {
		ns := newNamespace()
		dsn, db, table := migratedDB()
		createSecret(ns, "db", map[string]string{"dsn": dsn})
		r := &outboxv1.DeadLetterReplay{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fix"},
			Spec: outboxv1.DeadLetterReplaySpec{
				PipelineRef: outboxv1.PipelineReference{Name: "late"},
				Selector:    outboxv1.ReplaySelector{ErrorCode: "MESSAGE_TOO_LARGE"},
				Reason:      "INC-1: broker limit raised",
			},
		}
		Expect(k8sClient.Create(suiteCtx, r)).To(Succeed())
		getReplay := func() *outboxv1.DeadLetterReplay {
			var cur outboxv1.DeadLetterReplay
			Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(r), &cur)).To(Succeed())
			return &cur
		}
		Eventually(func() string {
			c := condition(getReplay().Status.Conditions, outboxv1.ConditionReady)
			return string(c.Status) + "/" + c.Reason
		}).Should(Equal("False/" + outboxv1.ReasonPipelineNotFound))
		Expect(getReplay().Status.Phase).To(Equal(outboxv1.ReplayPending))

		By("the spec may still be fixed before the replay starts")
		cur := getReplay()
		cur.Spec.Rate = 50
		Expect(k8sClient.Update(suiteCtx, cur)).To(Succeed())

		By("creating the pipeline wakes the replay (no polling needed)")
		Expect(k8sClient.Create(suiteCtx, newPipeline(ns, "late", "db"))).To(Succeed())
		var job batchv1.Job
		Eventually(func() error {
			return k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "fix-replay"}, &job)
		}).Should(Succeed())
		expectOwnedBy(&job, getReplay())
		Expect(job.Spec.Template.Spec.Containers[0].Args).To(ContainElements("replay", "--rate=50", "--error-code=MESSAGE_TOO_LARGE"))
		Expect(*job.Spec.Template.Spec.AutomountServiceAccountToken).To(BeFalse())
		Eventually(getReplay).Should(HaveField("Status.StartTime", Not(BeNil())))

		By("the spec is immutable once started")
		cur = getReplay()
		cur.Spec.Rate = 10
		err := k8sClient.Update(suiteCtx, cur)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec is immutable once the replay has started"))

		By("status mirrors the Job and the worker's audit row")
		replayID := getReplay().Status.ReplayID
		Expect(replayID).To(HavePrefix(ns + "/fix/"))
		_, err = db.Exec(`INSERT INTO `+table.WithSuffix("_replay_audit").Qualified()+
			` (replay_id, requested_by, reason, selector, phase, matched, replayed, succeeded, dead_again)
			  VALUES ($1, 'oncall', 'INC-1', '{}', 'Running', 5, 3, 2, 1)`, replayID)
		Expect(err).NotTo(HaveOccurred())
		now := metav1.Now()
		job.Status.StartTime = &now
		job.Status.Active = 1
		Expect(k8sClient.Status().Update(suiteCtx, &job)).To(Succeed())
		Eventually(getReplay, 20*time.Second).Should(And(
			HaveField("Status.Phase", outboxv1.ReplayRunning),
			HaveField("Status.Matched", int64(5)),
			HaveField("Status.Replayed", int64(3)),
			HaveField("Status.Succeeded", int64(2)),
			HaveField("Status.DeadAgain", int64(1)),
		))
	})
})
