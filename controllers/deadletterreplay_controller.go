/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controllers

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
)

// DeadLetterReplayReconciler runs each DeadLetterReplay as one Job and mirrors the
// Job and the replay's audit row into the status.
type DeadLetterReplayReconciler struct {
	client.Client
	APIReader  client.Reader
	Scheme     *runtime.Scheme
	Recorder   events.EventRecorder
	RelayImage string
	Pools      *outboxstats.Pools
}

// +kubebuilder:rbac:groups=outbox.dev,resources=deadletterreplays,verbs=get;list;watch
// +kubebuilder:rbac:groups=outbox.dev,resources=deadletterreplays/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=outbox.dev,resources=deadletterreplays/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create

// Reconcile: fetch, resolve the pipeline, create the Job once, mirror its progress.
func (r *DeadLetterReplayReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx).WithValues("replay", req.NamespacedName)
	ctx = logf.IntoContext(ctx, log)

	var rp outboxv1.DeadLetterReplay
	if err := r.Get(ctx, req.NamespacedName, &rp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	st := rp.Status.DeepCopy()
	st.ObservedGeneration = rp.Generation
	if st.Phase == "" {
		st.Phase = outboxv1.ReplayPending
	}

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

func (r *DeadLetterReplayReconciler) reconcile(ctx context.Context, rp *outboxv1.DeadLetterReplay, st *outboxv1.DeadLetterReplayStatus) (ctrl.Result, error) {
	if st.Phase == outboxv1.ReplaySucceeded || st.Phase == outboxv1.ReplayFailed {
		return ctrl.Result{}, nil // finished: the audit table keeps the record
	}
	var job batchv1.Job
	if st.StartTime == nil {
		res, err := resolvePipeline(ctx, r.Client, r.APIReader, rp.Namespace, rp.Spec.PipelineRef.Name)
		if err != nil {
			return ctrl.Result{}, err
		}
		desired := DesiredReplayJob(rp, res.P, r.RelayImage)
		if err := ensureOwned(ctx, r.Client, r.Scheme, rp, desired, &job, desired.Spec,
			func(dst, src *batchv1.Job) {}); err != nil {
			return ctrl.Result{}, err
		}
		now := metav1.Now()
		st.StartTime = &now
		st.JobName = desired.Name
		st.ReplayID = ReplayID(rp)
		setCondition(&st.Conditions, rp.Generation, outboxv1.ConditionReady, metav1.ConditionTrue, outboxv1.ReasonJobCreated,
			fmt.Sprintf("Job %s started; the spec is now frozen", desired.Name))
		return ctrl.Result{RequeueAfter: 15 * time.Second}, nil
	}

	if err := r.Get(ctx, client.ObjectKey{Namespace: rp.Namespace, Name: st.JobName}, &job); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		st.Phase = outboxv1.ReplayFailed
		now := metav1.Now()
		st.CompletionTime = &now
		setCondition(&st.Conditions, rp.Generation, outboxv1.ConditionReady, metav1.ConditionFalse, outboxv1.ReasonJobMissing,
			fmt.Sprintf("Job %s disappeared before it finished; check the audit table for replay id %s and create a new DeadLetterReplay if needed", st.JobName, st.ReplayID))
		return ctrl.Result{}, nil
	}
	switch {
	case jobCondition(&job, batchv1.JobComplete):
		st.Phase = outboxv1.ReplaySucceeded
		st.CompletionTime = job.Status.CompletionTime
		setCondition(&st.Conditions, rp.Generation, outboxv1.ConditionReady, metav1.ConditionTrue, outboxv1.ReasonCompleted, "replay finished")
	case jobCondition(&job, batchv1.JobFailed):
		st.Phase = outboxv1.ReplayFailed
		now := metav1.Now()
		st.CompletionTime = &now
		setCondition(&st.Conditions, rp.Generation, outboxv1.ConditionReady, metav1.ConditionFalse, outboxv1.ReasonJobFailed,
			fmt.Sprintf("Job %s failed; see `kubectl logs job/%s` and the audit row %s", job.Name, job.Name, st.ReplayID))
	case job.Status.Active > 0 || job.Status.StartTime != nil:
		st.Phase = outboxv1.ReplayRunning
	}
	r.readAudit(ctx, rp, st)
	if st.Phase == outboxv1.ReplaySucceeded || st.Phase == outboxv1.ReplayFailed {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: 15 * time.Second}, nil
}

// readAudit copies the worker's counts from the audit table, best effort.
func (r *DeadLetterReplayReconciler) readAudit(ctx context.Context, rp *outboxv1.DeadLetterReplay, st *outboxv1.DeadLetterReplayStatus) {
	res, err := resolvePipeline(ctx, r.Client, r.APIReader, rp.Namespace, rp.Spec.PipelineRef.Name)
	if err != nil {
		return
	}
	db, err := r.Pools.Get(rp.Namespace+"/"+res.P.Name, res.DSN)
	if err != nil {
		return
	}
	a, found, err := outboxstats.ReadReplayAudit(ctx, db, res.Table, st.ReplayID)
	if err != nil || !found {
		return
	}
	st.Matched, st.Replayed, st.Succeeded, st.DeadAgain = a.Matched, a.Replayed, a.Succeeded, a.DeadAgain
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// SetupWithManager registers the controller and the pipeline-name index.
func (r *DeadLetterReplayReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Pools == nil {
		r.Pools = outboxstats.NewPools()
	}
	if err := indexPipelineRef(ctx, mgr, &outboxv1.DeadLetterReplay{}, func(o client.Object) string {
		return o.(*outboxv1.DeadLetterReplay).Spec.PipelineRef.Name
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&outboxv1.DeadLetterReplay{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&batchv1.Job{}).
		Watches(&outboxv1.OutboxPipeline{}, enqueueReferrers(mgr.GetClient(),
			func() client.ObjectList { return &outboxv1.DeadLetterReplayList{} },
			func(l client.ObjectList) []client.Object {
				var out []client.Object
				for i := range l.(*outboxv1.DeadLetterReplayList).Items {
					out = append(out, &l.(*outboxv1.DeadLetterReplayList).Items[i])
				}
				return out
			}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Named("deadletterreplay").
		Complete(r)
}
