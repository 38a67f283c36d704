/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// DefaultMaxConcurrentReconciles is how many OutboxPipelines are reconciled at the same
// time unless --max-concurrent-reconciles says otherwise.
const DefaultMaxConcurrentReconciles = 4

// OutboxPipelineReconciler turns an OutboxPipeline into a relay Deployment (plus its
// ServiceAccount, metrics Service and PodDisruptionBudget) and reports the outbox
// table's lag and dead counts in the status.
type OutboxPipelineReconciler struct {
	client.Client
	// APIReader reads what the manager's cache does not hold: Secrets' data (through
	// secrets) and children without the managed-by label.
	APIReader  client.Reader
	Scheme     *runtime.Scheme
	Recorder   events.EventRecorder
	RelayImage string
	Pools      *outboxstats.Pools
	// MaxConcurrentReconciles defaults to DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// Now is time.Now unless a test replaces it.
	Now func() time.Time
	// SlotReplacedFor is how long the SlotReplaced condition stays after a slot was
	// replaced; DefaultSlotReplacedFor when 0.
	SlotReplacedFor time.Duration
	// applied skips child applies that would change nothing (applied.go); nil
	// applies every child on every pass. SetupWithManager sets it.
	applied *appliedCache
	// secrets reads Secrets when they changed (secretCache); nil reads them uncached
	// with APIReader. SetupWithManager sets it.
	secrets *secretCache
}

// +kubebuilder:rbac:groups=outbox.dev,resources=outboxpipelines,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=outbox.dev,resources=outboxpipelines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=outbox.dev,resources=outboxpipelines/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch
// The Secret watch is of metadata only, but list and watch grant the whole objects:
// docs/operations.md ("RBAC and Secrets").
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile is one pass: fetch, then the phases of reconcile, then the status written
// once. A user-fixable problem (*refProblem) ends the phases early; it becomes
// Ready=False and Degraded=True, and the pass is retried after statusInterval.
// A pass cut short by the manager's stop ends without a status write or an error
// (stop.go).
func (r *OutboxPipelineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx = logf.IntoContext(ctx, logf.FromContext(ctx).WithValues("pipeline", req.NamespacedName))
	result, err := r.pass(ctx, req)
	return endPass(ctx, result, err)
}

func (r *OutboxPipelineReconciler) pass(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p, err := r.fetch(ctx, req)
	if p == nil {
		return ctrl.Result{}, err
	}
	if !p.DeletionTimestamp.IsZero() {
		if controllerutil.ContainsFinalizer(p, SlotFinalizer) {
			return r.finalize(ctx, p)
		}
		return ctrl.Result{}, nil
	}
	if err := r.ensureSlotFinalizer(ctx, p); err != nil {
		return ctrl.Result{}, err
	}
	pd := p.WithDefaults()
	st := p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation

	result, err := r.reconcile(ctx, pd, st)
	if err != nil {
		problem, err := asRefProblem(err)
		if err != nil {
			return ctrl.Result{}, err
		}
		setNotReady(st, p.Generation, problem)
		pipelineMetrics.unread(p.Namespace, p.Name)
		result = ctrl.Result{RequeueAfter: pd.Spec.Monitoring.StatusInterval.Duration}
	}
	result = r.setSlotReplaced(st, p.Generation, result)
	setPipelineKstatus(st, p.Generation, pd.Spec.Source.Migrate)
	return patchStatusIfChanged(ctx, r.Client, r.Recorder, p, &p.Status, st, result)
}

// reconcile runs the phases between fetch and the status write on p (with defaults),
// recording what it observes in st.
func (r *OutboxPipelineReconciler) reconcile(ctx context.Context, p *outboxv1.OutboxPipeline, st *outboxv1.OutboxPipelineStatus) (ctrl.Result, error) {
	table, err := r.validate(p)
	if err != nil {
		return ctrl.Result{}, err
	}
	secrets, err := r.readSecrets(ctx, p)
	if err != nil {
		return ctrl.Result{}, err
	}
	children := r.desiredChildren(p, secrets)
	if err := r.applyChildren(ctx, p, children); err != nil {
		return ctrl.Result{}, err
	}
	observeWorkers(p, children.deployment, st)
	now := r.now()
	view := r.observeDatabase(ctx, p, table, string(secrets.Data[p.Spec.Source.DSNSecretRef]))
	if view.problem != nil && stopped(ctx) {
		return ctrl.Result{}, ctx.Err() // a cancelled read is no DatabaseUnreachable
	}
	if view.stats.Contract.Version != schema.ContractNone {
		st.TableContract = fmt.Sprintf("v%d", view.stats.Contract.Version) // what lets a spec go back from v2 (CEL)
		st.TableShards = int32(view.stats.Contract.Shards)                 // 0 for v1
	}
	if view.problem == nil {
		recordStats(st, view.stats, now)
		r.reconcileSlot(ctx, p, table, view, st)
	}
	pipelineMetrics.observe(p, st, view.stats, view.problem, now)
	h := pipelineHealth{p: p, st: st, table: table, dbProblem: view.problem, workers: view.stats.Workers,
		deployment: children.deployment.Name, now: now}
	setReady(h)
	setDegraded(h)
	return ctrl.Result{RequeueAfter: p.Spec.Monitoring.StatusInterval.Duration}, nil
}

// fetch returns the pipeline, or nil when it is gone: its children go with their
// owner references, and only its database pool is left to close.
func (r *OutboxPipelineReconciler) fetch(ctx context.Context, req ctrl.Request) (*outboxv1.OutboxPipeline, error) {
	var p outboxv1.OutboxPipeline
	if err := r.Get(ctx, req.NamespacedName, &p); err != nil {
		if apierrors.IsNotFound(err) {
			r.Pools.Forget(poolKey(req.Namespace, req.Name))
			r.applied.forgetOwner(req.NamespacedName)
			pipelineMetrics.forget(req.Namespace, req.Name)
			return nil, nil
		}
		return nil, fmt.Errorf("get OutboxPipeline %s: %w", req.NamespacedName, err)
	}
	return &p, nil
}

// validate checks what the CRD schema cannot fully express.
func (r *OutboxPipelineReconciler) validate(p *outboxv1.OutboxPipeline) (pgident.Table, error) {
	table, err := pgident.NewTable(p.Spec.Source.Schema, p.Spec.Source.Table)
	if err != nil {
		return table, &refProblem{outboxv1.ReasonInvalidSpec, err.Error() + "; fix spec.source"}
	}
	// A Quantity's sign is beyond the schema (it may be an integer or a string).
	if q := p.Spec.Source.MaxSlotLag; q != nil && q.Sign() <= 0 {
		return table, &refProblem{outboxv1.ReasonInvalidSpec, fmt.Sprintf("spec.source.maxSlotLag %s must be positive (bytes of WAL, e.g. 1Gi)", q.String())}
	}
	return table, nil
}

// readSecrets reads the referenced Secret keys, from the pipeline's namespace only,
// again only when a Secret changed. Nothing is applied until they all exist.
func (r *OutboxPipelineReconciler) readSecrets(ctx context.Context, p *outboxv1.OutboxPipeline) (SecretValues, error) {
	return readSecretRefs(ctx, secretReader(r.secrets, r.APIReader), p.Namespace, SecretRefs(p))
}

// relayChildren are the objects a pipeline owns. All of them carry owner references,
// so deleting the pipeline deletes them.
type relayChildren struct {
	serviceAccount *corev1.ServiceAccount
	service        *corev1.Service
	pdb            *policyv1.PodDisruptionBudget
	deployment     *appsv1.Deployment
}

// objects lists the children in apply order: the ServiceAccount before the
// Deployment whose pods run as it.
func (c relayChildren) objects() []client.Object {
	return []client.Object{c.serviceAccount, c.service, c.pdb, c.deployment}
}

// desiredChildren builds the children; the fingerprint of the Secret values in the
// pod template rolls the workers when a credential changes.
func (r *OutboxPipelineReconciler) desiredChildren(p *outboxv1.OutboxPipeline, secrets SecretValues) relayChildren {
	return relayChildren{
		serviceAccount: DesiredServiceAccount(p),
		service:        DesiredService(p),
		pdb:            DesiredPDB(p),
		deployment:     DesiredDeployment(p, r.RelayImage, SecretHash(secrets)),
	}
}

// applyChildren applies every child; on return each holds its live state.
func (r *OutboxPipelineReconciler) applyChildren(ctx context.Context, p *outboxv1.OutboxPipeline, children relayChildren) error {
	return childApplier{c: r.Client, api: r.APIReader, scheme: r.Scheme, applied: r.applied}.apply(ctx, p, children.objects()...)
}

func (r *OutboxPipelineReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager registers the controller and the Secret-name indexes (the replay
// and retention controllers' Secret watches use them too). Every child kind is
// watched, so a hand edit or deletion of a child queues the pass that puts it back,
// and so is the metadata of Secrets, so a changed Secret queues its pipelines' passes.
func (r *OutboxPipelineReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Pools == nil {
		r.Pools = outboxstats.NewPools()
	}
	if r.secrets == nil {
		r.secrets = newSecretCache(mgr.GetCache(), mgr.GetAPIReader())
	}
	if r.applied == nil {
		r.applied = newAppliedCache()
	}
	n := r.MaxConcurrentReconciles
	if n <= 0 {
		n = DefaultMaxConcurrentReconciles
	}
	if err := indexSecretRefs(ctx, mgr); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&outboxv1.OutboxPipeline{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	w := secretWatch{c: mgr.GetCache(), secrets: r.secrets}
	return watchesSecrets(b, w, w.pipelines).
		WithOptions(controller.Options{MaxConcurrentReconciles: n}).
		Named("outboxpipeline").
		Complete(r)
}
