/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// historyRetry is how soon an unreadable run history is read again; without it the
// next attempt would wait for the next scheduled run.
const historyRetry = time.Minute

// RetentionPolicyReconciler runs a RetentionPolicy as a CronJob of `relayworker archive`
// and reports the newest run the worker recorded in the pipeline's database.
type RetentionPolicyReconciler struct {
	client.Client
	APIReader  client.Reader
	Scheme     *runtime.Scheme
	Recorder   events.EventRecorder
	RelayImage string
	// Pools are shared with the pipeline controller: one small pool per pipeline.
	Pools *outboxstats.Pools
}

// +kubebuilder:rbac:groups=outbox.dev,resources=retentionpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=outbox.dev,resources=retentionpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=outbox.dev,resources=retentionpolicies/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch;create;update;patch

// Reconcile: fetch, resolve the pipeline, apply the CronJob, mirror its status and the
// newest recorded run, write status once.
func (r *RetentionPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx).WithValues("retentionPolicy", req.NamespacedName)
	ctx = logf.IntoContext(ctx, log)

	var rp outboxv1.RetentionPolicy
	if err := r.Get(ctx, req.NamespacedName, &rp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	st := rp.Status.DeepCopy()
	st.ObservedGeneration = rp.Generation

	result, err := r.reconcile(ctx, rp.WithDefaults(), st)
	if err != nil {
		if result, err = resultForRefProblem(err, &st.Conditions, rp.Generation); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := patchStatusIfChanged(ctx, r.Client, r.Recorder, &rp, &rp.Status, st); err != nil {
		return ctrl.Result{}, err
	}
	return result, nil
}

func (r *RetentionPolicyReconciler) reconcile(ctx context.Context, rp *outboxv1.RetentionPolicy, st *outboxv1.RetentionPolicyStatus) (ctrl.Result, error) {
	sched, err := parseSchedule(rp.Spec.Schedule, rp.Spec.TimeZone)
	if err != nil {
		return ctrl.Result{}, &refProblem{outboxv1.ReasonInvalidSpec, fmt.Sprintf("spec.schedule %q: %v", rp.Spec.Schedule, err)}
	}
	res, err := resolvePipeline(ctx, r.Client, r.APIReader, rp.Namespace, rp.Spec.PipelineRef.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	desired := DesiredRetentionCronJob(rp, res.P, r.RelayImage)
	var cj batchv1.CronJob
	if err := ensureOwned(ctx, r.Client, r.Scheme, rp, desired, &cj, []any{desired.Spec, res.Secret},
		func(dst, src *batchv1.CronJob) { dst.Spec = src.Spec }); err != nil {
		return ctrl.Result{}, err
	}
	st.CronJobName = desired.Name
	st.LastRunTime = cj.Status.LastScheduleTime
	st.LastSuccessfulTime = cj.Status.LastSuccessfulTime

	// Best effort: the CronJob is in place whatever the database says.
	historyRead := r.readLastRun(ctx, rp, res, st)
	result := schedule(rp, sched, desired.Name, st)
	if !historyRead && (result.RequeueAfter == 0 || result.RequeueAfter > historyRetry) {
		result.RequeueAfter = historyRetry
	}
	return result, nil
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
		msg := outboxstats.Redact(err.Error(), res.DSN)
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
	st.LastArchiveTime = timePtr(run.FinishedAt)
	st.LastSentArchived = ptr.To(run.SentMoved)
	st.LastDeadArchived = ptr.To(run.DeadMoved)
	st.LastConsumerLogTrimmed = ptr.To(run.ConsumerLogTrimmed)
	st.LastRunError = truncate(outboxstats.Redact(run.Error, res.DSN), maxRunError)
	finished := run.FinishedAt.UTC().Format(time.RFC3339)
	if run.Error != "" {
		setCondition(&st.Conditions, gen, outboxv1.ConditionDegraded, metav1.ConditionTrue, outboxv1.ReasonLastRunFailed,
			fmt.Sprintf("the archive run that ended %s failed after removing %d SENT and %d DEAD rows: %s; see the logs of the CronJob's last Job",
				finished, run.SentMoved, run.DeadMoved, st.LastRunError))
		return true
	}
	setCondition(&st.Conditions, gen, outboxv1.ConditionDegraded, metav1.ConditionFalse, outboxv1.ReasonLastRunSucceeded,
		fmt.Sprintf("the archive run that ended %s removed %d SENT and %d DEAD rows and %d consumer-log rows (%s mode)",
			finished, run.SentMoved, run.DeadMoved, run.ConsumerLogTrimmed, run.Mode))
	return true
}

// maxRunError bounds status.lastRunError (the CRD allows 512 characters).
const maxRunError = 500

// lastRun reads the newest recorded run, bounded by statsTimeout.
func (r *RetentionPolicyReconciler) lastRun(ctx context.Context, rp *outboxv1.RetentionPolicy, res *resolvedPipeline) (outboxstats.ArchiveRun, bool, error) {
	db, err := r.Pools.Get(rp.Namespace+"/"+res.P.Name, res.DSN)
	if err != nil {
		return outboxstats.ArchiveRun{}, false, err
	}
	rctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	return outboxstats.ReadLastArchiveRun(rctx, db, res.Table, ArchivePolicyKey(rp))
}

func parseSchedule(spec string, tz *string) (cron.Schedule, error) {
	if tz != nil && *tz != "" {
		if _, err := time.LoadLocation(*tz); err != nil {
			return nil, fmt.Errorf("unknown spec.timeZone %q", *tz)
		}
		spec = "CRON_TZ=" + *tz + " " + spec
	}
	return cron.ParseStandard(spec)
}

// SetupWithManager registers the controller and the pipeline-name index.
func (r *RetentionPolicyReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Pools == nil {
		r.Pools = outboxstats.NewPools()
	}
	if err := indexPipelineRef(ctx, mgr, &outboxv1.RetentionPolicy{}, func(o client.Object) string {
		return o.(*outboxv1.RetentionPolicy).Spec.PipelineRef.Name
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&outboxv1.RetentionPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&batchv1.CronJob{}).
		Watches(&outboxv1.OutboxPipeline{}, enqueueReferrers(mgr.GetClient(),
			func() client.ObjectList { return &outboxv1.RetentionPolicyList{} },
			func(l client.ObjectList) []client.Object {
				var out []client.Object
				for i := range l.(*outboxv1.RetentionPolicyList).Items {
					out = append(out, &l.(*outboxv1.RetentionPolicyList).Items[i])
				}
				return out
			}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Named("retentionpolicy").
		Complete(r)
}
