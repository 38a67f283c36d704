package gitops

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

func newReplay(ns, name, pipeline string, dryRun bool) *outboxv1.DeadLetterReplay {
	return &outboxv1.DeadLetterReplay{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: outboxv1.DeadLetterReplaySpec{PipelineRef: outboxv1.PipelineReference{Name: pipeline},
			Selector: outboxv1.ReplaySelector{ErrorCode: "MESSAGE_TOO_LARGE"}, Reason: "INC-5: max.message.bytes raised", DryRun: dryRun},
	}
}

// TestDeadLetterReplayHealth runs replays through the real reconciler; the tests play
// the Job controller and the replay worker's audit row.
func TestDeadLetterReplayHealth(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	db, table := migratedDB(t, ns)
	must(t, kube.Create(ctx, newPipeline(ns, "db")))

	ok := newReplay(ns, "fix", "orders", false)
	must(t, kube.Create(ctx, ok))
	startJob(t, ns, "fix-replay")
	running := waitFor(t, ok, "replay running", func() bool { return ok.Status.Phase == outboxv1.ReplayRunning })
	_, err := db.Exec(`INSERT INTO `+table.WithSuffix(schema.ReplayAuditSuffix).Qualified()+` (replay_id, requested_by, reason, selector,
		phase, matched, replayed, succeeded, dead_again) VALUES ($1, 'oncall', 'INC-5', '{}', 'Succeeded', 4, 4, 3, 1)`, ok.Status.ReplayID)
	must(t, err)
	finishJob(t, ns, "fix-replay", true)
	done := waitForEnd(t, ok, "replay succeeded", func() bool { return ok.Status.Phase == outboxv1.ReplaySucceeded && ok.Status.Matched == 4 })

	dry := newReplay(ns, "count", "orders", true)
	must(t, kube.Create(ctx, dry))
	startJob(t, ns, "count-replay")
	// A real Job runs a while between start and end.
	waitFor(t, dry, "dry run running", func() bool { return dry.Status.Phase == outboxv1.ReplayRunning })
	finishJob(t, ns, "count-replay", true)
	dryDone := waitForEnd(t, dry, "dry run succeeded", func() bool { return dry.Status.Phase == outboxv1.ReplaySucceeded })

	bad := newReplay(ns, "doomed", "orders", false)
	must(t, kube.Create(ctx, bad))
	startJob(t, ns, "doomed-replay")
	waitFor(t, bad, "doomed replay running", func() bool { return bad.Status.Phase == outboxv1.ReplayRunning })
	finishJob(t, ns, "doomed-replay", false)
	failed := waitForEnd(t, bad, "replay failed", func() bool { return bad.Status.Phase == outboxv1.ReplayFailed })

	lost := newReplay(ns, "lost", "no-such-pipeline", false)
	must(t, kube.Create(ctx, lost))
	noPipeline := waitFor(t, lost, "pipeline missing", func() bool { return is(lost.Status.Conditions, "Ready", "False/PipelineNotFound") })

	runCases(t, []healthCase{
		{name: "running", obj: running, kstatus: status.InProgressStatus, today: status.InProgressStatus,
			argo: "Progressing", argoMsg: "Running: 0 of 0 matched events replayed"},
		{name: "succeeded", obj: done, kstatus: status.CurrentStatus, today: status.CurrentStatus,
			argo: "Healthy", argoMsg: "Replayed 4 of 4 matched events: 3 succeeded, 1 dead again"},
		{name: "dry run succeeded", obj: dryDone, kstatus: status.CurrentStatus, today: status.CurrentStatus,
			argo: "Healthy", argoMsg: "Dry run: 0 events match; nothing was replayed"},
		{name: "not yet observed", obj: unobserved(done), kstatus: status.InProgressStatus, today: status.InProgressStatus,
			argo: "Progressing", argoMsg: "Waiting for the operator to observe generation 2"},
		{name: "failed", obj: failed, kstatus: status.FailedStatus, today: status.FailedStatus,
			argo: "Degraded", argoMsg: "JobFailed: Job doomed-replay failed"},
		{name: "pipeline missing", obj: noPipeline, kstatus: status.FailedStatus, today: status.FailedStatus,
			argo: "Degraded", argoMsg: `PipelineNotFound`},
	})
}

// waitForEnd is waitFor for a replay whose Job has finished. Nothing else wakes the
// reconciler then, so this also checks that a final status write lost to a Conflict
// is requeued, not dropped.
func waitForEnd(t *testing.T, rp *outboxv1.DeadLetterReplay, what string, ok func() bool) *unstructured.Unstructured {
	t.Helper()
	if snap, done := poll(t, rp, 30*time.Second, ok); done {
		return snap
	}
	t.Fatalf("%s: not reached in 30s; status: %+v", what, rp.Status)
	return nil
}
