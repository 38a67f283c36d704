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
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

// RetentionPolicyReconciler runs a RetentionPolicy as a CronJob of `relayworker archive`.
type RetentionPolicyReconciler struct {
	client.Client
	APIReader  client.Reader
	Scheme     *runtime.Scheme
	Recorder   events.EventRecorder
	RelayImage string
}

// +kubebuilder:rbac:groups=outbox.dev,resources=retentionpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=outbox.dev,resources=retentionpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=outbox.dev,resources=retentionpolicies/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch;create;update;patch

// Reconcile: fetch, resolve the pipeline, apply the CronJob, mirror its status.
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
		return ctrl.Result{}, &refProblem{ReasonInvalidSpec, fmt.Sprintf("spec.schedule %q: %v", rp.Spec.Schedule, err)}
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
	if rp.Spec.Suspend {
		st.NextRunTime = nil
		setCondition(&st.Conditions, rp.Generation, outboxv1.ConditionReady, metav1.ConditionTrue, ReasonSuspended,
			fmt.Sprintf("CronJob %s is suspended (spec.suspend)", desired.Name))
		return ctrl.Result{}, nil
	}
	next := metav1.NewTime(sched.Next(time.Now()))
	st.NextRunTime = &next
	setCondition(&st.Conditions, rp.Generation, outboxv1.ConditionReady, metav1.ConditionTrue, ReasonScheduled,
		fmt.Sprintf("CronJob %s runs on %q", desired.Name, rp.Spec.Schedule))
	// Refresh nextRunTime after the run; the CronJob's own status changes wake us too.
	return ctrl.Result{RequeueAfter: time.Until(next.Time) + 5*time.Second}, nil
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
