/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// statsTimeout bounds one read of the outbox table; an unreachable database costs a
// pipeline this much and never blocks the others (MaxConcurrentReconciles > 1).
const statsTimeout = 3 * time.Second

// heartbeat is how stale status.lastCheckTime may get when no count changes.
const heartbeat = time.Minute

// OutboxPipelineReconciler turns an OutboxPipeline into a relay Deployment (plus its
// ServiceAccount, metrics Service and PodDisruptionBudget) and reports the outbox
// table's lag and dead counts in the status.
type OutboxPipelineReconciler struct {
	client.Client
	// APIReader reads Secrets without a cache (and without a cluster-wide informer).
	APIReader  client.Reader
	Scheme     *runtime.Scheme
	Recorder   events.EventRecorder
	RelayImage string
	Pools      *outboxstats.Pools
	// MaxConcurrentReconciles defaults to 4.
	MaxConcurrentReconciles int
	// Now is time.Now unless a test replaces it.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=outbox.dev,resources=outboxpipelines,verbs=get;list;watch
// +kubebuilder:rbac:groups=outbox.dev,resources=outboxpipelines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=outbox.dev,resources=outboxpipelines/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=services;serviceaccounts,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile runs the phases: fetch, validate, read Secrets, apply children, read the
// table, write status once.
func (r *OutboxPipelineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx).WithValues("pipeline", req.NamespacedName)
	ctx = logf.IntoContext(ctx, log)

	// Phase 1: fetch.
	var p outboxv1.OutboxPipeline
	if err := r.Get(ctx, req.NamespacedName, &p); err != nil {
		if apierrors.IsNotFound(err) {
			r.Pools.Forget(req.String()) // children go with their owner references
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	pd := p.WithDefaults()
	st := p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation

	// Phases 2-6 (see reconcile); a user-fixable problem ends them early.
	result, err := r.reconcile(ctx, pd, st)
	if err != nil {
		problem, err := asRefProblem(err)
		if err != nil {
			return ctrl.Result{}, err
		}
		r.setNotReady(st, p.Generation, problem.Reason, problem.Message)
		result = ctrl.Result{RequeueAfter: pd.Spec.Monitoring.StatusInterval.Duration}
	}

	// Final phase: write the status once, only when it changed.
	if err := patchStatusIfChanged(ctx, r.Client, r.Recorder, &p, &p.Status, st); err != nil {
		return ctrl.Result{}, err
	}
	return result, nil
}

func (r *OutboxPipelineReconciler) setNotReady(st *outboxv1.OutboxPipelineStatus, gen int64, reason, msg string) {
	setCondition(&st.Conditions, gen, outboxv1.ConditionReady, metav1.ConditionFalse, reason, msg)
	setCondition(&st.Conditions, gen, outboxv1.ConditionDegraded, metav1.ConditionTrue, reason, msg)
	if meta.FindStatusCondition(st.Conditions, outboxv1.ConditionProgressing) == nil {
		setCondition(&st.Conditions, gen, outboxv1.ConditionProgressing, metav1.ConditionFalse, reason, "waiting for the problem to be fixed")
	}
}

func (r *OutboxPipelineReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// reconcile does the work; a *refProblem error is a user-fixable problem for the status.
func (r *OutboxPipelineReconciler) reconcile(ctx context.Context, p *outboxv1.OutboxPipeline, st *outboxv1.OutboxPipelineStatus) (ctrl.Result, error) {
	gen := p.Generation
	interval := p.Spec.Monitoring.StatusInterval.Duration

	// Phase 2: validate what the CRD schema cannot fully express.
	table, err := pgident.NewTable(p.Spec.Source.Schema, p.Spec.Source.Table)
	if err != nil {
		return ctrl.Result{}, &refProblem{outboxv1.ReasonInvalidSpec, err.Error() + "; fix spec.source"}
	}

	// Phase 3: Secrets, from this namespace only, uncached.
	values, problem, err := readSecretRefs(ctx, r.APIReader, p.Namespace, SecretRefs(p))
	if err != nil {
		return ctrl.Result{}, err
	}
	if problem != nil {
		return ctrl.Result{}, problem
	}
	dsn := string(values.Data[p.Spec.Source.DSNSecretRef])

	// Phase 4: children, owned by the pipeline so deletion cleans them up.
	if err := ensureOwned(ctx, r.Client, r.Scheme, p, DesiredServiceAccount(p), &corev1.ServiceAccount{},
		[]any{false}, func(dst, src *corev1.ServiceAccount) {
			dst.AutomountServiceAccountToken = src.AutomountServiceAccountToken
		}); err != nil {
		return ctrl.Result{}, err
	}
	svc := DesiredService(p)
	if err := ensureOwned(ctx, r.Client, r.Scheme, p, svc, &corev1.Service{}, svc.Spec, func(dst, src *corev1.Service) {
		dst.Spec.Ports = src.Spec.Ports
		dst.Spec.Selector = src.Spec.Selector
		dst.Spec.Type = src.Spec.Type
	}); err != nil {
		return ctrl.Result{}, err
	}
	pdb := DesiredPDB(p)
	if err := ensureOwned(ctx, r.Client, r.Scheme, p, pdb, &policyv1.PodDisruptionBudget{}, pdb.Spec,
		func(dst, src *policyv1.PodDisruptionBudget) { dst.Spec = src.Spec }); err != nil {
		return ctrl.Result{}, err
	}
	desired := DesiredDeployment(p, r.RelayImage, SecretHash(values))
	var dep appsv1.Deployment
	if err := ensureOwned(ctx, r.Client, r.Scheme, p, desired, &dep, desired.Spec,
		func(dst, src *appsv1.Deployment) { dst.Spec = src.Spec }); err != nil {
		return ctrl.Result{}, err
	}
	if dep.Name == "" { // just created: the desired object is what exists
		dep = *desired
	}
	st.DeploymentName = dep.Name
	st.Replicas = *desired.Spec.Replicas
	st.ReadyWorkers = dep.Status.ReadyReplicas
	st.Workers = fmt.Sprintf("%d/%d", st.ReadyWorkers, st.Replicas)

	// Progressing: the Deployment controller has not caught up with the template yet.
	rolling := dep.Generation == 0 || dep.Status.ObservedGeneration < dep.Generation ||
		dep.Status.UpdatedReplicas < st.Replicas || dep.Status.Replicas > dep.Status.UpdatedReplicas
	if rolling {
		setCondition(&st.Conditions, gen, outboxv1.ConditionProgressing, metav1.ConditionTrue, outboxv1.ReasonRollingOut,
			fmt.Sprintf("rolling out Deployment %s: %d of %d workers updated", dep.Name, dep.Status.UpdatedReplicas, st.Replicas))
	} else {
		setCondition(&st.Conditions, gen, outboxv1.ConditionProgressing, metav1.ConditionFalse, outboxv1.ReasonRolloutComplete,
			fmt.Sprintf("Deployment %s is up to date", dep.Name))
	}

	// Phase 5: read the outbox table (bounded; a failure only degrades this pipeline).
	now := r.now()
	workers, dbErr := r.readStats(ctx, p, table, dsn, st, now)

	// Phase 6: Ready and Degraded.
	r.setReady(p, st, dbErr, dep.Name)
	r.setDegraded(p, st, dbErr, brokerUnavailableMessage(workers), now)
	return ctrl.Result{RequeueAfter: interval}, nil
}

func (r *OutboxPipelineReconciler) setReady(p *outboxv1.OutboxPipeline, st *outboxv1.OutboxPipelineStatus, dbErr *refProblem, depName string) {
	gen := p.Generation
	switch {
	case dbErr != nil:
		setCondition(&st.Conditions, gen, outboxv1.ConditionReady, metav1.ConditionFalse, dbErr.Reason, dbErr.Message)
	case p.Spec.Paused:
		setCondition(&st.Conditions, gen, outboxv1.ConditionReady, metav1.ConditionFalse, outboxv1.ReasonPaused,
			"spec.paused is true: no workers run, events accumulate as PENDING")
	case st.Replicas > 0 && st.ReadyWorkers == 0:
		setCondition(&st.Conditions, gen, outboxv1.ConditionReady, metav1.ConditionFalse, outboxv1.ReasonWorkersNotReady,
			fmt.Sprintf("0/%d relay workers ready%s; see `kubectl describe deployment %s` and the pods' logs",
				st.Replicas, brokerHint(st.BrokerUnavailableWorkers), depName))
	default:
		setCondition(&st.Conditions, gen, outboxv1.ConditionReady, metav1.ConditionTrue, outboxv1.ReasonReady,
			fmt.Sprintf("%d/%d relay workers ready, database reachable", st.ReadyWorkers, st.Replicas))
	}
}

// readStats copies one snapshot of the table into st and returns the workers' broker
// reports (zero when the table could not be read; st then keeps the previous values).
func (r *OutboxPipelineReconciler) readStats(ctx context.Context, p *outboxv1.OutboxPipeline, table pgident.Table, dsn string,
	st *outboxv1.OutboxPipelineStatus, now time.Time) (outboxstats.Workers, *refProblem) {
	key := p.Namespace + "/" + p.Name
	db, err := r.Pools.Get(key, dsn)
	if err != nil {
		return outboxstats.Workers{}, &refProblem{outboxv1.ReasonDatabaseUnreachable, fmt.Sprintf("cannot use the DSN from Secret %q key %q: %v",
			p.Spec.Source.DSNSecretRef.Name, p.Spec.Source.DSNSecretRef.Key, err)}
	}
	rctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	s, err := outboxstats.Read(rctx, db, table)
	if err != nil {
		msg := outboxstats.Redact(err.Error(), dsn)
		if errors.Is(err, outboxstats.ErrTableMissing) {
			return outboxstats.Workers{}, &refProblem{outboxv1.ReasonTableMissing, msg}
		}
		logf.FromContext(ctx).V(1).Info("outbox table not readable", "table", table.String(), "error", msg)
		return outboxstats.Workers{}, &refProblem{outboxv1.ReasonDatabaseUnreachable, fmt.Sprintf(
			"cannot read %s with the DSN from Secret %q key %q: %s", table, p.Spec.Source.DSNSecretRef.Name,
			p.Spec.Source.DSNSecretRef.Key, msg)}
	}

	prev := *st
	if st.LastCheckTime != nil && s.Dead > st.Dead {
		st.DeadLastIncreaseTime = &metav1.Time{Time: now}
	}
	st.Pending, st.Sending, st.Retrying = s.Pending, s.Sending, s.Retrying
	st.ExpiredLeases, st.Dead = s.ExpiredLeases, s.Dead
	st.OldestPendingTime = timePtr(s.OldestPending)
	st.LastPublishTime = timePtr(s.LastPublish)
	st.BrokerUnavailableWorkers = s.Workers.BrokerDown
	st.BrokerUnavailableSince = timePtr(s.Workers.BrokerDownSince)
	changed := prev.Pending != st.Pending || prev.Sending != st.Sending || prev.Retrying != st.Retrying ||
		prev.ExpiredLeases != st.ExpiredLeases || prev.Dead != st.Dead ||
		prev.BrokerUnavailableWorkers != st.BrokerUnavailableWorkers ||
		!equality.Semantic.DeepEqual(prev.OldestPendingTime, st.OldestPendingTime) ||
		!equality.Semantic.DeepEqual(prev.LastPublishTime, st.LastPublishTime) ||
		!equality.Semantic.DeepEqual(prev.BrokerUnavailableSince, st.BrokerUnavailableSince)
	if changed || st.LastCheckTime == nil || now.Sub(st.LastCheckTime.Time) >= heartbeat {
		st.LastCheckTime = &metav1.Time{Time: now}
	}
	return s.Workers, nil
}

// setDegraded picks the most explanatory problem: the database first (without it nothing
// else can be read), then a broker outage reported by the workers (brokerMsg, "" when
// none; it explains delayed events), then delays and dead events.
func (r *OutboxPipelineReconciler) setDegraded(p *outboxv1.OutboxPipeline, st *outboxv1.OutboxPipelineStatus, dbErr *refProblem,
	brokerMsg string, now time.Time) {
	gen := p.Generation
	m := p.Spec.Monitoring
	switch {
	case dbErr != nil:
		setCondition(&st.Conditions, gen, outboxv1.ConditionDegraded, metav1.ConditionTrue, dbErr.Reason, dbErr.Message)
	case brokerMsg != "":
		setCondition(&st.Conditions, gen, outboxv1.ConditionDegraded, metav1.ConditionTrue, outboxv1.ReasonBrokerUnavailable, brokerMsg)
	case st.OldestPendingTime != nil && now.Sub(st.OldestPendingTime.Time) > m.OldestPendingAgeThreshold.Duration:
		age := now.Sub(st.OldestPendingTime.Time).Truncate(time.Second)
		setCondition(&st.Conditions, gen, outboxv1.ConditionDegraded, metav1.ConditionTrue, outboxv1.ReasonEventsDelayed, fmt.Sprintf(
			"the oldest unpublished event is %s old (threshold %s, %d pending, %d retrying); check the workers' logs, broker health and last_error_code of RETRY rows",
			age, m.OldestPendingAgeThreshold.Duration, st.Pending, st.Retrying))
	case st.DeadLastIncreaseTime != nil && now.Sub(st.DeadLastIncreaseTime.Time) < m.DeadGrowthWindow.Duration:
		setCondition(&st.Conditions, gen, outboxv1.ConditionDegraded, metav1.ConditionTrue, outboxv1.ReasonDeadEventsIncreasing, fmt.Sprintf(
			"%d DEAD events, more than before (last increase %s); inspect last_error_code, fix the cause, then replay them with a DeadLetterReplay",
			st.Dead, st.DeadLastIncreaseTime.UTC().Format(time.RFC3339)))
	default:
		setCondition(&st.Conditions, gen, outboxv1.ConditionDegraded, metav1.ConditionFalse, outboxv1.ReasonHealthy,
			fmt.Sprintf("database reachable; %d pending, %d retrying, %d dead", st.Pending, st.Retrying, st.Dead))
	}
}

func timePtr(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	// The API stores seconds; compare like with like so an unchanged value is unchanged.
	mt := metav1.NewTime(t.Truncate(time.Second))
	return &mt
}

// SetupWithManager registers the controller.
func (r *OutboxPipelineReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Pools == nil {
		r.Pools = outboxstats.NewPools()
	}
	n := r.MaxConcurrentReconciles
	if n <= 0 {
		n = 4
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&outboxv1.OutboxPipeline{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: n}).
		Named("outboxpipeline").
		Complete(r)
}
