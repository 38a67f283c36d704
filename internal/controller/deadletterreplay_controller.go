/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

import (
	"context"
	"database/sql"
	"fmt"
	"time"

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

// replayPoll is how often a running replay is mirrored: the Job's own changes wake the
// reconciler (Owns), the worker's audit row in the database (or the consumer group's
// replay record) does not.
const replayPoll = 15 * time.Second

// DeadLetterReplayReconciler runs each DeadLetterReplay as one Job and mirrors the
// Job and the replay's audit row (with spec.consumer: the consumer group's record of
// the replay request) into the status.
type DeadLetterReplayReconciler struct {
	client.Client
	APIReader  client.Reader
	Scheme     *runtime.Scheme
	Recorder   events.EventRecorder
	RelayImage string
	Pools      *outboxstats.Pools
	// secrets reads Secrets when they changed (secretCache); nil reads them uncached
	// with APIReader. SetupWithManager sets it.
	secrets *secretCache
}

// +kubebuilder:rbac:groups=outbox.dev,resources=deadletterreplays,verbs=get;list;watch
// +kubebuilder:rbac:groups=outbox.dev,resources=deadletterreplays/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=outbox.dev,resources=deadletterreplays/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch

// Reconcile is one pass: fetch, then start the replay (resolve the pipeline, build
// and create the Job once) or observe it (mirror the Job and the audit row), then
// write the status once. A user-fixable problem becomes Ready=False with a backoff.
// A pass cut short by the manager's stop ends without a status write or an error
// (stop.go).
func (r *DeadLetterReplayReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx = logf.IntoContext(ctx, logf.FromContext(ctx).WithValues("replay", req.NamespacedName))
	result, err := r.pass(ctx, req)
	return endPass(ctx, result, err)
}

func (r *DeadLetterReplayReconciler) pass(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var rp outboxv1.DeadLetterReplay
	if err := r.Get(ctx, req.NamespacedName, &rp); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil // the Job goes with its owner reference
		}
		return ctrl.Result{}, fmt.Errorf("get DeadLetterReplay %s: %w", req.NamespacedName, err)
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
	setKstatusConditions(&st.Conditions, rp.Generation, !replayFinished(st), outboxv1.ReasonReplayInProgress,
		"the replay is "+st.Phase, "")
	return patchStatusIfChanged(ctx, r.Client, r.Recorder, &rp, &rp.Status, st, result)
}

func (r *DeadLetterReplayReconciler) reconcile(ctx context.Context, rp *outboxv1.DeadLetterReplay, st *outboxv1.DeadLetterReplayStatus) (ctrl.Result, error) {
	switch {
	case replayFinished(st):
		return ctrl.Result{}, nil // the audit table keeps the record
	case st.StartTime == nil:
		return r.start(ctx, rp, st)
	default:
		return r.observe(ctx, rp, st)
	}
}

// start resolves the target (a missing pipeline or Secret waits as a condition),
// creates the Job and freezes the spec (status.startTime).
func (r *DeadLetterReplayReconciler) start(ctx context.Context, rp *outboxv1.DeadLetterReplay, st *outboxv1.DeadLetterReplayStatus) (ctrl.Result, error) {
	job, err := r.desiredJob(ctx, rp)
	if err != nil {
		return ctrl.Result{}, err
	}
	if current, err := r.isCurrent(ctx, rp); err != nil || !current {
		return ctrl.Result{RequeueAfter: time.Second}, err // the watch brings the newer version
	}
	if err := r.createJob(ctx, rp, job); err != nil {
		return ctrl.Result{}, err
	}
	markStarted(rp, st, job.Name)
	return ctrl.Result{RequeueAfter: replayPoll}, nil
}

// isCurrent reports whether rp is the API server's current version. The Job is
// created once, from the spec it freezes, so it must not come from a cache that has
// not yet seen the user's last edit of the spec (that edit would be silently lost).
func (r *DeadLetterReplayReconciler) isCurrent(ctx context.Context, rp *outboxv1.DeadLetterReplay) (bool, error) {
	var cur outboxv1.DeadLetterReplay
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(rp), &cur); err != nil {
		return false, fmt.Errorf("read DeadLetterReplay %s/%s: %w", rp.Namespace, rp.Name, err)
	}
	return cur.ResourceVersion == rp.ResourceVersion, nil
}

// desiredJob renders the Job once what it needs was found: the consumer database's
// Secret (spec.consumer), or the pipeline and its Secrets.
func (r *DeadLetterReplayReconciler) desiredJob(ctx context.Context, rp *outboxv1.DeadLetterReplay) (*batchv1.Job, error) {
	if rp.Spec.Consumer != nil {
		if _, err := resolveConsumer(ctx, secretReader(r.secrets, r.APIReader), rp); err != nil {
			return nil, err
		}
		return DesiredConsumerReplayJob(rp, r.RelayImage), nil
	}
	res, err := resolvePipeline(ctx, r.Client, secretReader(r.secrets, r.APIReader), rp.Namespace, rp.Spec.PipelineRef.Name)
	if err != nil {
		return nil, err
	}
	return DesiredReplayJob(rp, res.P, r.RelayImage), nil
}

// createJob applies the Job only if it does not exist yet. A Job's pod template is
// immutable, and one that exists already is this replay's (created by a pass whose
// status write was lost), so it is kept as it is rather than re-applied: a replay
// sends one apply in its life, and needs no appliedCache (applied.go) to skip more.
func (r *DeadLetterReplayReconciler) createJob(ctx context.Context, rp *outboxv1.DeadLetterReplay, job *batchv1.Job) error {
	return childApplier{c: r.Client, api: r.APIReader, scheme: r.Scheme}.createOnce(ctx, rp, job)
}

// observe mirrors the Job's progress and the worker's audit row. A deleted Job is
// not recreated: the replay ran (part of) its course, which only the audit row knows.
func (r *DeadLetterReplayReconciler) observe(ctx context.Context, rp *outboxv1.DeadLetterReplay, st *outboxv1.DeadLetterReplayStatus) (ctrl.Result, error) {
	var job batchv1.Job
	if err := r.Get(ctx, client.ObjectKey{Namespace: rp.Namespace, Name: st.JobName}, &job); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get Job %s: %w", st.JobName, err)
		}
		markJobMissing(rp, st)
		return ctrl.Result{}, nil
	}
	mirrorJob(rp, &job, st)
	replayedBefore := st.Replayed
	if rp.Spec.Consumer != nil {
		r.readConsumerReplay(ctx, rp, st)
	} else {
		r.readAudit(ctx, rp, st)
	}
	setProgress(st, replayedBefore, time.Now())
	if replayFinished(st) {
		r.forgetConsumerPool(rp)
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: replayPoll}, nil
}

// readAudit copies the worker's counts from the audit table, best effort: the
// counts are informative, the Job decides the phase.
func (r *DeadLetterReplayReconciler) readAudit(ctx context.Context, rp *outboxv1.DeadLetterReplay, st *outboxv1.DeadLetterReplayStatus) {
	res, err := resolvePipeline(ctx, r.Client, secretReader(r.secrets, r.APIReader), rp.Namespace, rp.Spec.PipelineRef.Name)
	if err != nil {
		return
	}
	var a outboxstats.ReplayAudit
	var found bool
	err = r.Pools.Read(ctx, poolKey(rp.Namespace, res.P.Name), res.DSN, func(db *sql.DB) (err error) {
		a, found, err = outboxstats.ReadReplayAudit(ctx, db, res.Table, st.ReplayID)
		return err
	})
	if err != nil || !found {
		return
	}
	st.Matched, st.Replayed, st.Succeeded, st.DeadAgain = a.Matched, a.Replayed, a.Succeeded, a.DeadAgain
}

// SetupWithManager registers the controller and the pipeline-name index.
func (r *DeadLetterReplayReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Pools == nil {
		r.Pools = outboxstats.NewPools()
	}
	if r.secrets == nil {
		r.secrets = newSecretCache(mgr.GetCache(), mgr.GetAPIReader())
	}
	if err := indexPipelineRef(ctx, mgr, &outboxv1.DeadLetterReplay{}, func(o client.Object) string {
		return o.(*outboxv1.DeadLetterReplay).Spec.PipelineRef.Name
	}); err != nil {
		return fmt.Errorf("index DeadLetterReplays by pipeline: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&outboxv1.DeadLetterReplay{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&batchv1.Job{}).
		Watches(&outboxv1.OutboxPipeline{}, enqueueReferrers(mgr.GetClient(), newReplayList),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	w := secretWatch{c: mgr.GetCache(), secrets: r.secrets}
	return watchesSecrets(b, w, w.replays).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Named("deadletterreplay").
		Complete(r)
}
