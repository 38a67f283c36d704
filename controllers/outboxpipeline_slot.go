/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controllers

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

// observeSlot records the slot in st (LogicalReplication), or drops the slot of a
// pipeline that left that mode. Errors are reported, never fatal to the pass: the
// relay works without the operator's view of its slot.
func (r *OutboxPipelineReconciler) observeSlot(ctx context.Context, p *outboxv1.OutboxPipeline, db *sql.DB, st *outboxv1.OutboxPipelineStatus) {
	slot := ReplicationSlot(p)
	if !p.Spec.LogicalReplication() {
		if st.Replication == nil {
			return
		}
		if err := replslot.Drop(ctx, db, slot, slot); err != nil {
			logSlotError(ctx, "could not drop the slot of a pipeline that left LogicalReplication mode; retrying", slot, err)
			return
		}
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, "SlotDropped", "DropSlot", "dropped replication slot and publication %s: the pipeline polls now", slot)
		st.Replication = nil
		return
	}
	table, err := pgident.NewTable(p.Spec.Source.Schema, p.Spec.Source.Table)
	if err != nil {
		return // validate reported it
	}
	seen, err := readSlot(ctx, db, slot)
	if err != nil {
		logSlotError(ctx, "could not read the replication slot", slot, err)
		return
	}
	plan := planSlot(st.Replication, seen, table)
	var replaced *outboxv1.SlotReplacement
	if plan.moveTo {
		r.movePublication(ctx, p, db, seen.tables, table)
	}
	if plan.ensure {
		replaced = r.ensureSlot(ctx, p, db, table, plan)
	}
	if plan.ensure || plan.moveTo {
		if seen, err = readSlot(ctx, db, slot); err != nil {
			logSlotError(ctx, "could not read the replication slot", slot, err)
			return
		}
	}
	if replaced == nil && st.Replication != nil {
		replaced = st.Replication.LastReplaced
	}
	s := seen.slot
	st.Replication = &outboxv1.ReplicationStatus{Slot: slot, Publication: slot, Exists: seen.found,
		Active: s.Active, ConfirmedLSN: s.ConfirmedLSN, LagBytes: s.LagBytes, WALStatus: s.WALStatus,
		PublicationTable: strings.Join(seen.tables, ","), LastReplaced: replaced}
}

// logSlotError logs a failed slot operation, unless the manager's stop failed it.
func logSlotError(ctx context.Context, msg, slot string, err error) {
	if !stopped(ctx) {
		logf.FromContext(ctx).Info(msg, "slot", slot, "error", dbErrorText(err, ""))
	}
}

// readSlot reads the slot and what its publication (of the same name) covers.
func readSlot(ctx context.Context, db *sql.DB, slot string) (slotSeen, error) {
	s, found, err := replslot.Read(ctx, db, slot)
	if err != nil {
		return slotSeen{}, err
	}
	tables, pubFound, err := replslot.PublicationTables(ctx, db, slot)
	if err != nil {
		return slotSeen{}, err
	}
	return slotSeen{found: found, slot: s, pubFound: pubFound, tables: tables}, nil
}

// ensureSlot makes what plan says is missing, and returns the record of a replacement
// (nil when there was none). The Event is sent at once: the status write of this pass
// may still fail.
func (r *OutboxPipelineReconciler) ensureSlot(ctx context.Context, p *outboxv1.OutboxPipeline, db *sql.DB, table pgident.Table,
	plan slotPlan) *outboxv1.SlotReplacement {
	slot := ReplicationSlot(p)
	_, invalidated, err := replslot.Ensure(ctx, db, table, slot, slot)
	if err != nil && stopped(ctx) {
		return nil
	}
	if err != nil {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "SlotNotCreated", "CreateSlot",
			"cannot make replication slot %s: %s; polling publishes meanwhile", slot, dbErrorText(err, ""))
		return nil
	}
	reason := plan.replacing
	if invalidated {
		reason = outboxv1.ReasonSlotInvalidated
	}
	if reason == "" {
		return nil
	}
	rec := replacementRecord(slot, reason, r.now())
	r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "SlotReplaced", "CreateSlot", "%s", rec.Message)
	logf.FromContext(ctx).Info("replaced the replication slot", "slot", slot, "reason", reason)
	return rec
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

// slotProblem is the Degraded reason and message for the slot, or "".
func slotProblem(p *outboxv1.OutboxPipeline, st *outboxv1.OutboxPipelineStatus) (reason, msg string) {
	rs := st.Replication
	if !p.Spec.LogicalReplication() || rs == nil || !rs.Exists {
		return "", ""
	}
	if rs.WALStatus == "lost" {
		return outboxv1.ReasonSlotInvalidated, fmt.Sprintf("PostgreSQL invalidated replication slot %s (max_slot_wal_keep_size): polling publishes every event meanwhile, and the relay replaces the slot", rs.Slot)
	}
	if rs.PublicationTable != "" && rs.PublicationTable != p.Spec.Source.Schema+"."+p.Spec.Source.Table {
		return outboxv1.ReasonPublicationMismatch, fmt.Sprintf("publication %s covers %s, not spec.source.table %s.%s, and the operator could not move it (see the PublicationNotMoved event; ALTER PUBLICATION needs ownership of the table): every event waits cdcHandoverAfter for polling",
			rs.Publication, rs.PublicationTable, p.Spec.Source.Schema, p.Spec.Source.Table)
	}
	if max := p.Spec.Source.MaxSlotLag; max != nil && rs.LagBytes > max.Value() {
		return outboxv1.ReasonSlotLagging, fmt.Sprintf("replication slot %s holds %d bytes of WAL, more than maxSlotLag %s (active: %t); check the relay workers and long-running transactions",
			rs.Slot, rs.LagBytes, max.String(), rs.Active)
	}
	return "", ""
}

func slotReason(p *outboxv1.OutboxPipeline, st *outboxv1.OutboxPipelineStatus) string {
	reason, _ := slotProblem(p, st)
	return reason
}
