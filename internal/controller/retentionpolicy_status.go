/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// The RetentionPolicy's status: the CronJob's runs, the newest run the archive worker
// recorded (Degraded), and the schedule (Ready, nextRunTime).

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
	"github.com/outbox-operator/outbox-operator/internal/redact"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// maxRunError bounds status.lastRunError (the CRD allows 512 characters).
const maxRunError = 500

// mirrorCronJob copies the applied CronJob's name and run times.
func mirrorCronJob(cj *batchv1.CronJob, st *outboxv1.RetentionPolicyStatus) {
	st.CronJobName = cj.Name
	st.LastRunTime = cj.Status.LastScheduleTime
	st.LastSuccessfulTime = cj.Status.LastSuccessfulTime
}

// schedule sets Ready and nextRunTime from the (valid) schedule and asks to be woken
// after the next run to refresh nextRunTime; the CronJob's own status changes wake the
// reconciler too (and a finished Job has recorded its run before the CronJob notices).
func schedule(rp *outboxv1.RetentionPolicy, sched cron.Schedule, cronJob string, st *outboxv1.RetentionPolicyStatus) ctrl.Result {
	if rp.Spec.Suspend {
		st.NextRunTime = nil
		setCondition(&st.Conditions, rp.Generation, outboxv1.ConditionReady, metav1.ConditionTrue, outboxv1.ReasonSuspended,
			fmt.Sprintf("CronJob %s is suspended (spec.suspend)", cronJob))
		return ctrl.Result{}
	}
	next := metav1.NewTime(sched.Next(time.Now()))
	st.NextRunTime = &next
	setCondition(&st.Conditions, rp.Generation, outboxv1.ConditionReady, metav1.ConditionTrue, outboxv1.ReasonScheduled,
		fmt.Sprintf("CronJob %s runs on %q", cronJob, rp.Spec.Schedule))
	return ctrl.Result{RequeueAfter: time.Until(next.Time) + 5*time.Second}
}

// readLastRun copies the newest run the archive worker recorded for this policy into
// the status and sets Degraded from it. It reports whether the history could be read;
// when not, the last known counts stay and Degraded becomes Unknown.
func (r *RetentionPolicyReconciler) readLastRun(ctx context.Context, rp *outboxv1.RetentionPolicy, res *resolvedPipeline,
	st *outboxv1.RetentionPolicyStatus) bool {
	gen := rp.Generation
	runs := res.Table.WithSuffix(schema.ArchiveRunsSuffix)
	run, found, err := r.lastRun(ctx, rp, res)
	if err != nil {
		msg := dbErrorText(err, res.DSN)
		logf.FromContext(ctx).V(1).Info("archive run history not readable", "table", runs.String(), "error", msg)
		setCondition(&st.Conditions, gen, outboxv1.ConditionDegraded, metav1.ConditionUnknown, outboxv1.ReasonDatabaseUnreachable,
			fmt.Sprintf("cannot read the run history %s with the DSN of OutboxPipeline %q: %s; the CronJob is not affected",
				runs, res.P.Name, msg))
		return false
	}
	if !found {
		st.LastArchiveTime = nil
		st.LastSentArchived, st.LastDeadArchived, st.LastConsumerLogTrimmed = nil, nil, nil
		st.LastRunError = ""
		setCondition(&st.Conditions, gen, outboxv1.ConditionDegraded, metav1.ConditionFalse, outboxv1.ReasonNoRunsYet,
			fmt.Sprintf("no archive run recorded in %s yet", runs))
		return true
	}
	recordRun(rp, run, res.DSN, st)
	return true
}

// recordRun copies a recorded run into st; a run that failed is Degraded (the policy
// stays Ready: the next run may well succeed).
func recordRun(rp *outboxv1.RetentionPolicy, run outboxstats.ArchiveRun, dsn string, st *outboxv1.RetentionPolicyStatus) {
	st.LastArchiveTime = timePtr(run.FinishedAt)
	st.LastSentArchived = ptr.To(run.SentMoved)
	st.LastDeadArchived = ptr.To(run.DeadMoved)
	st.LastConsumerLogTrimmed = ptr.To(run.ConsumerLogTrimmed)
	st.LastRunError = redact.Truncate(redact.DSN(run.Error, dsn), maxRunError)
	finished := run.FinishedAt.UTC().Format(time.RFC3339)
	if run.Error != "" {
		setCondition(&st.Conditions, rp.Generation, outboxv1.ConditionDegraded, metav1.ConditionTrue, outboxv1.ReasonLastRunFailed,
			fmt.Sprintf("the archive run that ended %s failed after removing %d SENT and %d DEAD rows: %s; see the logs of the CronJob's last Job",
				finished, run.SentMoved, run.DeadMoved, st.LastRunError))
		return
	}
	setCondition(&st.Conditions, rp.Generation, outboxv1.ConditionDegraded, metav1.ConditionFalse, outboxv1.ReasonLastRunSucceeded,
		fmt.Sprintf("the archive run that ended %s removed %d SENT and %d DEAD rows and %d consumer-log rows (%s mode)",
			finished, run.SentMoved, run.DeadMoved, run.ConsumerLogTrimmed, run.Mode))
}

// lastRun reads the newest recorded run (bounded by outboxstats.Timeout).
func (r *RetentionPolicyReconciler) lastRun(ctx context.Context, rp *outboxv1.RetentionPolicy, res *resolvedPipeline) (outboxstats.ArchiveRun, bool, error) {
	var run outboxstats.ArchiveRun
	var found bool
	err := r.Pools.Read(ctx, poolKey(rp.Namespace, res.P.Name), res.DSN, func(db *sql.DB) (err error) {
		run, found, err = outboxstats.ReadLastArchiveRun(ctx, db, res.Table, ArchivePolicyKey(rp))
		return err
	})
	return run, found, err
}
