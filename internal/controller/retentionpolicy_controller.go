/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
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
	// Pools are shared with the pipeline controller: one bounded pool per database.
	Pools *outboxstats.Pools
	// secrets reads Secrets when they changed (secretCache); nil reads them uncached
	// with APIReader. SetupWithManager sets it.
	secrets *secretCache
	// applied skips child applies that would change nothing (applied.go); nil
	// applies on every pass. SetupWithManager sets it.
	applied *appliedCache
}

// +kubebuilder:rbac:groups=outbox.dev,resources=retentionpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=outbox.dev,resources=retentionpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=outbox.dev,resources=retentionpolicies/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch;create;patch

// Reconcile is one pass: fetch, then the phases of reconcile, then the status written
// once. A user-fixable problem becomes Ready=False with a backoff.
// A pass cut short by the manager's stop ends without a status write or an error
// (stop.go).
func (r *RetentionPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx = logf.IntoContext(ctx, logf.FromContext(ctx).WithValues("retentionPolicy", req.NamespacedName))
	result, err := r.pass(ctx, req)
	return endPass(ctx, result, err)
}

func (r *RetentionPolicyReconciler) pass(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var rp outboxv1.RetentionPolicy
	if err := r.Get(ctx, req.NamespacedName, &rp); err != nil {
		if apierrors.IsNotFound(err) {
			r.applied.forgetOwner(req.NamespacedName)
			return ctrl.Result{}, nil // the CronJob goes with its owner reference
		}
		return ctrl.Result{}, fmt.Errorf("get RetentionPolicy %s: %w", req.NamespacedName, err)
	}
	st := rp.Status.DeepCopy()
	st.ObservedGeneration = rp.Generation

	result, err := r.reconcile(ctx, rp.WithDefaults(), st)
	if err != nil {
		if result, err = resultForRefProblem(err, &st.Conditions, rp.Generation); err != nil {
			return ctrl.Result{}, err
		}
	}
	setKstatusConditions(&st.Conditions, rp.Generation, false, "", "", "")
	return patchStatusIfChanged(ctx, r.Client, r.Recorder, &rp, &rp.Status, st, result)
}

// reconcile: validate the schedule, resolve the pipeline, apply the CronJob, mirror
// it, read the run history (best effort: the CronJob is in place whatever the
// database says), and schedule the next pass.
func (r *RetentionPolicyReconciler) reconcile(ctx context.Context, rp *outboxv1.RetentionPolicy, st *outboxv1.RetentionPolicyStatus) (ctrl.Result, error) {
	sched, err := validateSchedule(rp)
	if err != nil {
		return ctrl.Result{}, err
	}
	res, err := resolvePipeline(ctx, r.Client, secretReader(r.secrets, r.APIReader), rp.Namespace, rp.Spec.PipelineRef.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	cj := DesiredRetentionCronJob(rp, res.P, r.RelayImage)
	if err := r.applyCronJob(ctx, rp, cj); err != nil {
		return ctrl.Result{}, err
	}
	mirrorCronJob(cj, st)
	historyRead := r.readLastRun(ctx, rp, res, st)
	result := schedule(rp, sched, cj.Name, st)
	if !historyRead && (result.RequeueAfter == 0 || result.RequeueAfter > historyRetry) {
		result.RequeueAfter = historyRetry
	}
	return result, nil
}

// validateSchedule parses spec.schedule in spec.timeZone, which the CRD cannot check.
func validateSchedule(rp *outboxv1.RetentionPolicy) (cron.Schedule, error) {
	sched, err := parseSchedule(rp.Spec.Schedule, rp.Spec.TimeZone)
	if err != nil {
		return nil, &refProblem{outboxv1.ReasonInvalidSpec, fmt.Sprintf("spec.schedule %q: %v", rp.Spec.Schedule, err)}
	}
	return sched, nil
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

// applyCronJob applies the CronJob (its job template is mutable: a change applies to
// the next run); on return cj holds its live state.
func (r *RetentionPolicyReconciler) applyCronJob(ctx context.Context, rp *outboxv1.RetentionPolicy, cj *batchv1.CronJob) error {
	return childApplier{c: r.Client, api: r.APIReader, scheme: r.Scheme, applied: r.applied}.apply(ctx, rp, cj)
}

// SetupWithManager registers the controller and the pipeline-name index.
func (r *RetentionPolicyReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Pools == nil {
		r.Pools = outboxstats.NewPools()
	}
	if r.secrets == nil {
		r.secrets = newSecretCache(mgr.GetCache(), mgr.GetAPIReader())
	}
	if r.applied == nil {
		r.applied = newAppliedCache()
	}
	if err := indexPipelineRef(ctx, mgr, &outboxv1.RetentionPolicy{}, func(o client.Object) string {
		return o.(*outboxv1.RetentionPolicy).Spec.PipelineRef.Name
	}); err != nil {
		return fmt.Errorf("index RetentionPolicies by pipeline: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&outboxv1.RetentionPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&batchv1.CronJob{}).
		Watches(&outboxv1.OutboxPipeline{}, enqueueReferrers(mgr.GetClient(), newRetentionList),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	w := secretWatch{c: mgr.GetCache(), secrets: r.secrets}
	return watchesSecrets(b, w, w.retentionPolicies).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Named("retentionpolicy").
		Complete(r)
}
