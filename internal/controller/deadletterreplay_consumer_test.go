package controller

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/inbox"
)

func TestMirrorConsumerReplay(t *testing.T) {
	rec := func(status string, sel, applied, dups, failed int) inbox.ReplayState {
		return inbox.ReplayState{Status: status, Error: "handler: db password=s3cret failed",
			ReplayResult: inbox.ReplayResult{ReplayID: 7, Selected: sel, Applied: applied, Duplicates: dups, Failed: failed}}
	}
	for _, c := range []struct {
		name, phase string
		rec         inbox.ReplayState
		want        string // Ready status/reason
		msg         string
	}{
		{"waiting", outboxv1.ReplayRunning, rec("REQUESTED", 3, 0, 0, 0), "True/JobCreated", "waits for a running consumer of group \"billing\" to take replay request 7"},
		{"running", outboxv1.ReplayRunning, rec("RUNNING", 3, 1, 0, 0), "True/JobCreated", "replays request 7: 1 of 3 messages handled"},
		{"done", outboxv1.ReplaySucceeded, rec("DONE", 3, 1, 1, 1), "True/Completed", "1 applied, 1 duplicates, 1 failed again"},
		{"done at the limit", outboxv1.ReplaySucceeded, rec("DONE", 1000, 1000, 0, 0), "True/Completed", "it took the limit of 1000 messages"},
		{"nothing matched", outboxv1.ReplaySucceeded, rec("REQUESTED", 0, 0, 0, 0), "True/Completed", "no parked message"},
		{"nobody took it", outboxv1.ReplayFailed, rec("REQUESTED", 3, 0, 0, 0), "False/NoConsumer", "no running consumer of group \"billing\" took replay request 7"},
		{"consumer failed it", outboxv1.ReplayFailed, rec("FAILED", 3, 1, 0, 0), "False/JobFailed", "failed replay request 7 after 1 of 3 messages: handler: db password=[redacted] failed"},
		{"job failed while running", outboxv1.ReplayFailed, rec("RUNNING", 3, 1, 0, 0), "False/JobFailed", "the Job's own message"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rp := consumerReplay()
			st := &outboxv1.DeadLetterReplayStatus{Phase: c.phase, JobName: "fix-billing-replay"}
			setCondition(&st.Conditions, 1, outboxv1.ConditionReady, metav1.ConditionFalse, outboxv1.ReasonJobFailed, "the Job's own message")
			if c.phase != outboxv1.ReplayFailed {
				setCondition(&st.Conditions, 1, outboxv1.ConditionReady, metav1.ConditionTrue, outboxv1.ReasonJobCreated, "started")
			}
			mirrorConsumerReplay(rp, c.rec, "postgres://u:s3cret@db/app", st)
			ready := condition(st.Conditions, outboxv1.ConditionReady)
			if got := string(ready.Status) + "/" + ready.Reason; got != c.want || !strings.Contains(ready.Message, c.msg) {
				t.Errorf("Ready %s %q, want %s containing %q", got, ready.Message, c.want, c.msg)
			}
			r := c.rec
			if st.Matched != int64(r.Selected) || st.DeadAgain != int64(r.Failed) || st.Succeeded != int64(r.Applied+r.Duplicates) ||
				st.Replayed != int64(r.Applied+r.Duplicates+r.Failed) || st.Consumer.RequestID != 7 || st.Consumer.State != r.Status ||
				st.Consumer.Applied != int64(r.Applied) || st.Consumer.Duplicates != int64(r.Duplicates) {
				t.Errorf("status %+v consumer %+v for record %+v", st, st.Consumer, r)
			}
		})
	}
}

// inboxDB is a fresh database with the inbox tables and two parked messages of group
// billing; it returns the DSN and a handle.
func inboxDB() (string, *sql.DB) {
	ctx, cancel := context.WithTimeout(suiteCtx, 20*time.Second)
	defer cancel()
	dsn, err := pgSrv.CreateDatabase(ctx, "inbox")
	Expect(err).NotTo(HaveOccurred())
	db := openDB(dsn)
	Expect(inbox.Migrate(ctx, db, "public")).To(Succeed())
	for i, id := range []string{"p1", "p2"} {
		_, err := db.ExecContext(ctx, `INSERT INTO message_consume_parked
		    (consumer_group, topic, kafka_partition, kafka_offset, event_id, event_type, error_code, error_message, attempts)
		    VALUES ('billing', 'payments', 0, $1, $2, 'PaymentSucceeded', 'permanent', 'unknown currency', 1)`, i, id)
		Expect(err).NotTo(HaveOccurred())
	}
	return dsn, db
}

// finishJob records the end of a Job as the Job controller does (the API server
// checks the order of the conditions).
func finishJob(job *batchv1.Job, complete bool) {
	now := metav1.Now()
	Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(job), job)).To(Succeed())
	job.Status.StartTime, job.Status.Active = &now, 0
	first, last := batchv1.JobFailureTarget, batchv1.JobFailed
	if complete {
		first, last = batchv1.JobSuccessCriteriaMet, batchv1.JobComplete
		job.Status.CompletionTime, job.Status.Succeeded = &now, 1
	} else {
		job.Status.Failed = 4
	}
	for _, t := range []batchv1.JobConditionType{first, last} {
		job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue,
			LastProbeTime: now, LastTransitionTime: now, Reason: "Test", Message: "set by the test"})
	}
	Expect(k8sClient.Status().Update(suiteCtx, job)).To(Succeed())
}

var _ = Describe("DeadLetterReplay with a consumer target", func() {
	newConsumerReplay := func(ns, name string) *outboxv1.DeadLetterReplay {
		return &outboxv1.DeadLetterReplay{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: outboxv1.DeadLetterReplaySpec{
				Consumer: &outboxv1.ConsumerTarget{Group: "billing",
					DatabaseSecretRef: outboxv1.SecretKeyRef{Name: "billing-db", Key: "dsn"}},
				Selector:    outboxv1.ReplaySelector{ErrorCode: "permanent"},
				Reason:      "INC-9: currency table fixed",
				RequestedBy: "oncall@example.com",
			},
		}
	}
	get := func(r *outboxv1.DeadLetterReplay) func() *outboxv1.DeadLetterReplay {
		return func() *outboxv1.DeadLetterReplay {
			var cur outboxv1.DeadLetterReplay
			Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(r), &cur)).To(Succeed())
			return &cur
		}
	}
	ready := func(r *outboxv1.DeadLetterReplay) string {
		c := condition(r.Status.Conditions, outboxv1.ConditionReady)
		return string(c.Status) + "/" + c.Reason
	}
	// request records the replay request as the Job's worker does.
	request := func(db *sql.DB, r *outboxv1.DeadLetterReplay) inbox.ReplayRequest {
		req, err := inbox.RequestReplay(suiteCtx, db, "public", "billing", inbox.ReplaySelector{ErrorCode: "permanent"},
			inbox.ReplayOptions{RequestedBy: "oncall@example.com", Key: r.Status.ReplayID, Reason: "INC-9"})
		Expect(err).NotTo(HaveOccurred())
		return req
	}

	It("waits for the database Secret, renders the inbox-replay Job and mirrors the consumer group's record", func() {
		ns := newNamespace()
		dsn, db := inboxDB()
		r := newConsumerReplay(ns, "fix-billing")
		Expect(k8sClient.Create(suiteCtx, r)).To(Succeed())
		Eventually(func() string { return ready(get(r)()) }).Should(Equal("False/" + outboxv1.ReasonSecretNotFound))
		Expect(condition(get(r)().Status.Conditions, outboxv1.ConditionReady).Message).To(ContainSubstring("spec.consumer.databaseSecretRef"))

		By("the Secret appears: the Job is created once and the spec freezes")
		createSecret(ns, "billing-db", map[string]string{"dsn": dsn})
		var job batchv1.Job
		Eventually(func() error {
			return k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "fix-billing-replay"}, &job)
		}, 45*time.Second).Should(Succeed())
		cur := get(r)()
		expectOwnedBy(&job, cur)
		c := job.Spec.Template.Spec.Containers[0]
		Expect(c.Args).To(Equal(ConsumerReplayArgs(cur.WithDefaults())))
		Expect(c.Args).To(ContainElements("inbox-replay", "--group=billing", "--schema=public", "--error-code=permanent",
			"--replay-id="+ns+"/fix-billing/"+string(cur.UID), "--requested-by=oncall@example.com"))
		Expect(c.Env).To(HaveLen(1))
		Expect(c.Env[0].Name).To(Equal("INBOX_DSN"))
		Expect(c.Env[0].ValueFrom.SecretKeyRef.Name).To(Equal("billing-db"))
		Expect(c.Image).To(Equal("outbox-relayworker:test"))
		Eventually(get(r)).Should(HaveField("Status.StartTime", Not(BeNil())))
		cur = get(r)()
		cur.Spec.Rate = 10
		err := k8sClient.Update(suiteCtx, cur)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec is immutable once the replay has started"))

		By("the worker's request and the consumer's progress reach the status")
		req := request(db, get(r)())
		Expect(req.Selected).To(Equal(2))
		_, err = db.Exec(`UPDATE message_consume_replay SET status = 'DONE', applied = 1, duplicates = 1 WHERE replay_id = $1`, req.ID)
		Expect(err).NotTo(HaveOccurred())
		finishJob(&job, true)
		Eventually(get(r), 20*time.Second).Should(And(
			HaveField("Status.Phase", outboxv1.ReplaySucceeded),
			HaveField("Status.Matched", int64(2)),
			HaveField("Status.Replayed", int64(2)),
			HaveField("Status.Succeeded", int64(2)),
			HaveField("Status.DeadAgain", int64(0)),
			HaveField("Status.Consumer", Equal(&outboxv1.ConsumerReplayStatus{RequestID: req.ID, State: "DONE", Applied: 1, Duplicates: 1})),
		))
		done := get(r)()
		Expect(ready(done)).To(Equal("True/" + outboxv1.ReasonCompleted))
		Expect(condition(done.Status.Conditions, outboxv1.ConditionReady).Message).To(ContainSubstring("1 applied, 1 duplicates"))
		for _, cond := range done.Status.Conditions {
			Expect(cond.Message).NotTo(ContainSubstring(dsn))
		}
	})

	It("reports NoConsumer when the Job gave up on a request no consumer took", func() {
		ns := newNamespace()
		dsn, db := inboxDB()
		createSecret(ns, "billing-db", map[string]string{"dsn": dsn})
		r := newConsumerReplay(ns, "nobody-home")
		Expect(k8sClient.Create(suiteCtx, r)).To(Succeed())
		var job batchv1.Job
		Eventually(func() error {
			return k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "nobody-home-replay"}, &job)
		}).Should(Succeed())
		Eventually(get(r)).Should(HaveField("Status.ReplayID", Not(BeEmpty())))
		req := request(db, get(r)())
		finishJob(&job, false)
		Eventually(func() string { return ready(get(r)()) }, 20*time.Second).Should(Equal("False/" + outboxv1.ReasonNoConsumer))
		failed := get(r)()
		Expect(failed.Status.Phase).To(Equal(outboxv1.ReplayFailed))
		Expect(failed.Status.Consumer.State).To(Equal("REQUESTED"))
		Expect(failed.Status.Consumer.RequestID).To(Equal(req.ID))
		Expect(condition(failed.Status.Conditions, outboxv1.ConditionReady).Message).To(ContainSubstring(`no running consumer of group "billing"`))
	})
})
