/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/replslot"
)

// SlotFinalizer keeps a LogicalReplication pipeline until its replication slot and
// publication are dropped: a slot nobody reads keeps every byte of WAL from its
// position on, until the database's disk fills. It is the one finalizer the
// operator sets. Annotating the pipeline with AnnotationKeepSlot lets it go without
// the drop (the database is gone, or someone else owns the slot now).
const SlotFinalizer = "outbox.dev/replication-slot"

// AnnotationKeepSlot ("true") skips dropping the slot on deletion.
const AnnotationKeepSlot = "outbox.dev/keep-replication-slot"

// ensureSlotFinalizer adds the finalizer to a LogicalReplication pipeline, and removes
// it once a pipeline left that mode and its slot is gone (status.replication empty).
func (r *OutboxPipelineReconciler) ensureSlotFinalizer(ctx context.Context, p *outboxv1.OutboxPipeline) error {
	want := p.Spec.LogicalReplication() || p.Status.Replication != nil
	if want == controllerutil.ContainsFinalizer(p, SlotFinalizer) {
		return nil
	}
	patch := client.MergeFrom(p.DeepCopy())
	if want {
		controllerutil.AddFinalizer(p, SlotFinalizer)
	} else {
		controllerutil.RemoveFinalizer(p, SlotFinalizer)
	}
	if err := r.Patch(ctx, p, patch); err != nil {
		return fmt.Errorf("finalizer %s: %w", SlotFinalizer, err)
	}
	return nil
}

// finalize runs for a pipeline being deleted that still has the finalizer: the relay
// Deployment goes first (no reader may re-create the slot), then the slot and the
// publication, then the finalizer.
func (r *OutboxPipelineReconciler) finalize(ctx context.Context, p *outboxv1.OutboxPipeline) (ctrl.Result, error) {
	pd := p.WithDefaults()
	if p.Annotations[AnnotationKeepSlot] != "true" {
		// Workers under the operator never make a slot (RELAY_CDC_CREATE_SLOT=false), so
		// one still shutting down cannot bring back the slot dropped below.
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: RelayName(p)}}
		if err := r.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("delete relay Deployment before dropping the slot: %w", err)
		}
		db, err := r.slotDB(ctx, pd)
		if err != nil && stopped(ctx) {
			return ctrl.Result{}, err
		}
		if err != nil {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "SlotNotDropped", "Finalize",
				"cannot drop replication slot %s: %v; fix the DSN Secret, or drop it yourself (SELECT pg_drop_replication_slot('%s')) and annotate the pipeline %s=true",
				ReplicationSlot(p), err, ReplicationSlot(p), AnnotationKeepSlot)
			return ctrl.Result{RequeueAfter: pd.Spec.Monitoring.StatusInterval.Duration}, nil
		}
		if err := replslot.Drop(ctx, db, ReplicationSlot(p), ReplicationSlot(p)); err != nil {
			return ctrl.Result{}, fmt.Errorf("drop replication slot: %s", dbErrorText(err, ""))
		}
		logf.FromContext(ctx).Info("dropped replication slot and publication", "slot", ReplicationSlot(p))
	}
	patch := client.MergeFrom(p.DeepCopy())
	controllerutil.RemoveFinalizer(p, SlotFinalizer)
	if err := r.Patch(ctx, p, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("remove finalizer %s: %w", SlotFinalizer, err)
	}
	return ctrl.Result{}, nil
}

// slotDB is the pipeline's database: from its DSN Secret, or the pool from earlier
// passes when the Secret is already gone (a namespace being deleted takes both).
func (r *OutboxPipelineReconciler) slotDB(ctx context.Context, p *outboxv1.OutboxPipeline) (*sql.DB, error) {
	secrets, err := r.readSecrets(ctx, p)
	if err == nil {
		return r.Pools.Get(poolKey(p.Namespace, p.Name), string(secrets.Data[p.Spec.Source.DSNSecretRef]))
	}
	if db := r.Pools.Existing(poolKey(p.Namespace, p.Name)); db != nil {
		return db, nil
	}
	return nil, err
}

// reconcileSlot executes slotAction's plan for the slot and records the slot in st.
// Errors are reported, never fatal to the pass: the relay works without the
// operator's view of its slot.
func (r *OutboxPipelineReconciler) reconcileSlot(ctx context.Context, p *outboxv1.OutboxPipeline, table pgident.Table,
	view databaseView, st *outboxv1.OutboxPipelineStatus) {
	logical := p.Spec.LogicalReplication()
	if logical && view.slot == nil {
		return // its read failed (logged): the status keeps what the last pass saw
	}
	var seen replslot.State
	if view.slot != nil {
		seen = *view.slot
	}
	plan := slotAction(logical, st.Replication, seen, table)
	if plan.verb == slotDrop {
		r.dropSlot(ctx, p, view.db, st)
	}
	if !logical {
		return // a Polling pipeline records no slot
	}
	slot := ReplicationSlot(p)
	var replaced *outboxv1.SlotReplacement
	if st.Replication != nil {
		replaced = st.Replication.LastReplaced
	}
	if plan.verb != slotNone || plan.movePublication {
		if rec := r.changeSlot(ctx, p, view.db, plan, seen.Tables, table); rec != nil {
			replaced = rec
		}
		var err error
		if seen, err = replslot.Read(ctx, view.db, slot, slot); err != nil {
			logSlotError(ctx, "could not read the replication slot", slot, err)
			return
		}
	}
	st.Replication = replicationStatus(slot, seen, replaced)
}

// replicationStatus is status.replication for what a pass saw of the slot.
func replicationStatus(slot string, seen replslot.State, replaced *outboxv1.SlotReplacement) *outboxv1.ReplicationStatus {
	s := seen.Slot
	return &outboxv1.ReplicationStatus{Slot: slot, Publication: slot, Exists: seen.SlotFound,
		Active: s.Active, ConfirmedLSN: s.ConfirmedLSN, LagBytes: s.LagBytes, WALStatus: s.WALStatus,
		PublicationTable: strings.Join(seen.Tables, ","), LastReplaced: replaced}
}

// dropSlot drops the slot and publication of a pipeline that left LogicalReplication
// mode, and forgets them in st once they are gone.
func (r *OutboxPipelineReconciler) dropSlot(ctx context.Context, p *outboxv1.OutboxPipeline, db *sql.DB, st *outboxv1.OutboxPipelineStatus) {
	slot := ReplicationSlot(p)
	if err := replslot.Drop(ctx, db, slot, slot); err != nil {
		logSlotError(ctx, "could not drop the slot of a pipeline that left LogicalReplication mode; retrying", slot, err)
		return
	}
	r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, "SlotDropped", "DropSlot", "dropped replication slot and publication %s: the pipeline polls now", slot)
	st.Replication = nil
}

// logSlotError logs a failed slot operation, unless the manager's stop failed it.
func logSlotError(ctx context.Context, msg, slot string, err error) {
	if !stopped(ctx) {
		logf.FromContext(ctx).Info(msg, "slot", slot, "error", dbErrorText(err, ""))
	}
}

// changeSlot runs plan's statements (moving the publication from the tables it
// covered) and returns the record of a replacement, nil when there was none or it
// failed. The Events are sent at once: the status write of this pass may still fail.
func (r *OutboxPipelineReconciler) changeSlot(ctx context.Context, p *outboxv1.OutboxPipeline, db *sql.DB, plan slotPlan,
	from []string, table pgident.Table) *outboxv1.SlotReplacement {
	slot := ReplicationSlot(p)
	if plan.movePublication {
		r.movePublication(ctx, p, db, from, table)
	}
	if err := makeSlot(ctx, db, plan, slot, table); err != nil {
		if !stopped(ctx) {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "SlotNotCreated", "CreateSlot",
				"cannot make replication slot %s: %s; polling publishes meanwhile", slot, dbErrorText(err, ""))
		}
		return nil
	}
	if plan.verb != slotReplace {
		return nil
	}
	rec := replacementRecord(slot, plan.reason, r.now())
	r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "SlotReplaced", "CreateSlot", "%s", rec.Message)
	logf.FromContext(ctx).Info("replaced the replication slot", "slot", slot, "reason", plan.reason)
	return rec
}

// makeSlot makes the publication and the slot plan asks for, the lost slot dropped first.
func makeSlot(ctx context.Context, db *sql.DB, plan slotPlan, slot string, table pgident.Table) error {
	if plan.newPublication {
		if err := replslot.CreatePublication(ctx, db, slot, table); err != nil {
			return err
		}
	}
	if plan.dropLost {
		if err := replslot.DropSlot(ctx, db, slot); err != nil {
			return err
		}
	}
	if plan.newSlot {
		if _, err := replslot.CreateSlot(ctx, db, slot); err != nil {
			return err
		}
	}
	return nil
}

// movePublication points the publication at the spec's table; the slot stays
// (docs/cdc.md, "Changing spec.source.table"). A failure leaves the pipeline Degraded
// (PublicationMismatch) until a later pass succeeds.
func (r *OutboxPipelineReconciler) movePublication(ctx context.Context, p *outboxv1.OutboxPipeline, db *sql.DB, from []string, table pgident.Table) {
	pub := ReplicationSlot(p)
	if err := replslot.SetPublicationTable(ctx, db, pub, table); err != nil {
		if stopped(ctx) {
			return
		}
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "PublicationNotMoved", "MovePublication",
			"cannot move publication %s from %s to %s: %s", pub, strings.Join(from, ","), table, dbErrorText(err, ""))
		return
	}
	r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, "PublicationMoved", "MovePublication",
		"publication %s now covers %s (was %s); the slot stays, rows of %s committed before the move are published by polling after cdcHandoverAfter",
		pub, table, strings.Join(from, ","), table)
}
