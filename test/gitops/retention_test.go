package gitops

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/controller"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

func newPolicy(ns, name, pipeline string) *outboxv1.RetentionPolicy {
	return &outboxv1.RetentionPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       outboxv1.RetentionPolicySpec{PipelineRef: outboxv1.PipelineReference{Name: pipeline}},
	}
}

// TestRetentionPolicyHealth runs policies through the real reconciler; the tests
// play the CronJob controller and the archive worker's run record.
func TestRetentionPolicyHealth(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	db, table := migratedDB(t, ns)
	must(t, kube.Create(ctx, newPipeline(ns, "db")))

	rp := newPolicy(ns, "hourly", "orders")
	must(t, kube.Create(ctx, rp))
	scheduled := waitFor(t, rp, "scheduled", func() bool {
		return is(rp.Status.Conditions, "Ready", "True/Scheduled") && is(rp.Status.Conditions, "Degraded", "False/NoRunsYet")
	})
	_, err := db.Exec(`INSERT INTO `+table.WithSuffix(schema.ArchiveRunsSuffix).Qualified()+
		` (policy, mode, started_at, sent_moved, error) VALUES ($1, 'archive', now() - interval '2 seconds', 120, 'canceling statement due to statement timeout')`,
		controller.ArchivePolicyKey(rp))
	must(t, err)
	touchCronJob(t, ns, "hourly-retention")
	lastFailed := waitFor(t, rp, "last run failed", func() bool { return is(rp.Status.Conditions, "Degraded", "True/LastRunFailed") })

	off := newPolicy(ns, "paused", "orders")
	off.Spec.Suspend = true
	must(t, kube.Create(ctx, off))
	suspended := waitFor(t, off, "suspended", func() bool { return is(off.Status.Conditions, "Ready", "True/Suspended") })

	lost := newPolicy(ns, "lost", "no-such-pipeline")
	must(t, kube.Create(ctx, lost))
	noPipeline := waitFor(t, lost, "pipeline missing", func() bool { return is(lost.Status.Conditions, "Ready", "False/PipelineNotFound") })

	runCases(t, []healthCase{
		{name: "scheduled, no runs yet", obj: scheduled, kstatus: status.CurrentStatus, today: status.CurrentStatus,
			argo: "Healthy", argoMsg: "Scheduled"},
		{name: "not yet observed", obj: unobserved(scheduled), kstatus: status.InProgressStatus, today: status.InProgressStatus,
			argo: "Progressing", argoMsg: "Waiting for the operator to observe generation 2"},
		// A failed run is a health problem, not a reconcile problem: the CronJob is in
		// place and the next run may succeed, so Current is right for kstatus.
		{name: "last run failed", obj: lastFailed, kstatus: status.CurrentStatus, today: status.CurrentStatus,
			argo: "Degraded", argoMsg: "failed after removing 120 SENT and 0 DEAD rows: canceling statement due to statement timeout"},
		{name: "suspended", obj: suspended, kstatus: status.CurrentStatus, today: status.CurrentStatus,
			argo: "Suspended", argoMsg: "Suspended"},
		{name: "pipeline missing", obj: noPipeline, kstatus: status.FailedStatus, today: status.FailedStatus,
			argo: "Degraded", argoMsg: "PipelineNotFound"},
	})
}

// touchCronJob plays the CronJob controller recording a finished run, which wakes
// the reconciler.
func touchCronJob(t *testing.T, ns, name string) {
	t.Helper()
	var cj batchv1.CronJob
	must(t, kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cj))
	now := metav1.NewTime(time.Now())
	cj.Status.LastScheduleTime, cj.Status.LastSuccessfulTime = &now, &now
	must(t, kube.Status().Update(context.Background(), &cj))
}
