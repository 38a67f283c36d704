/*
Copyright 2026 The outbox-operator authors.

Licensed under the Apache License, Version 2.0.
*/

package controller

// The database phase of a pipeline's pass: observeDatabase takes the pipeline's pool
// once and reads what the status says of the database (the outbox table's snapshot,
// and for LogicalReplication the slot and its publication); reconcileSlot
// (outboxpipeline_slot.go) then changes the slot on the same pool.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
	"github.com/outbox-operator/outbox-operator/internal/outboxstats"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/pgversion"
	"github.com/outbox-operator/outbox-operator/internal/replslot"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// databaseView is what one pass read from the pipeline's database.
type databaseView struct {
	// db is the pool the reads used; reconcileSlot changes the slot through it.
	db    *sql.DB
	stats outboxstats.Stats
	// problem says why the outbox table could not be read; then nothing else was.
	problem *refProblem
	// slot is the slot and its publication (LogicalReplication); nil in another mode
	// or when its read failed (logged: the relay works without the operator's view
	// of its slot).
	slot *replslot.State
}

// observeDatabase reads the outbox table's snapshot in one of the database's read
// turns, bounded by outboxstats.Timeout (an unreachable database only degrades this
// pipeline, and a hung one fails its reads at once for a while: outboxstats.Read),
// then, for LogicalReplication, the slot, on the connection the pool keeps for slot
// management (outboxstats.Pools).
func (r *OutboxPipelineReconciler) observeDatabase(ctx context.Context, p *outboxv1.OutboxPipeline, table pgident.Table, dsn string) databaseView {
	var view databaseView
	err := r.Pools.Read(ctx, poolKey(p.Namespace, p.Name), dsn, func(db *sql.DB) (err error) {
		view.db = db
		view.stats, err = outboxstats.Read(ctx, db, table)
		return err
	})
	if err != nil {
		return databaseView{problem: statsProblem(ctx, p, table, dsn, err)} // what the read left is not read (Pools.Read)
	}
	view.problem = contractProblem(p.Spec.Source, table, view.stats.Contract)
	if p.Spec.LogicalReplication() {
		slot := ReplicationSlot(p)
		seen, err := replslot.Read(ctx, view.db, slot, slot)
		if err != nil {
			logSlotError(ctx, "could not read the replication slot", slot, err)
			return view
		}
		view.slot = &seen
	}
	return view
}

// statsProblem is the condition a failed read of table gives.
func statsProblem(ctx context.Context, p *outboxv1.OutboxPipeline, table pgident.Table, dsn string, err error) *refProblem {
	ref := p.Spec.Source.DSNSecretRef
	msg := dbErrorText(err, dsn)
	switch {
	case errors.Is(err, outboxstats.ErrDatabaseBusy):
		return &refProblem{outboxv1.ReasonDatabaseUnreachable, fmt.Sprintf(
			"cannot read %s: %s (the operator's reads of this database are waiting for it)", table, msg)}
	case errors.Is(err, outboxstats.ErrDatabaseUnresponsive):
		return &refProblem{outboxv1.ReasonDatabaseUnreachable, fmt.Sprintf(
			"cannot read %s: %s; check the database server, which the relay workers use too", table, msg)}
	case errors.Is(err, outboxstats.ErrUnusableDSN):
		return &refProblem{outboxv1.ReasonDatabaseUnreachable, fmt.Sprintf(
			"cannot use the DSN from Secret %q key %q: %s", ref.Name, ref.Key, msg)}
	case errors.Is(err, outboxstats.ErrTableMissing):
		return &refProblem{outboxv1.ReasonTableMissing, msg}
	case errors.Is(err, pgversion.ErrUnsupported):
		return &refProblem{outboxv1.ReasonPostgresVersionUnsupported, msg}
	}
	logf.FromContext(ctx).V(1).Info("outbox table not readable", "table", table.String(), "error", msg)
	return &refProblem{outboxv1.ReasonDatabaseUnreachable, fmt.Sprintf(
		"cannot read %s with the DSN from Secret %q key %q: %s", table, ref.Name, ref.Key, msg)}
}

// contractProblem is the condition of a pipeline whose spec names another contract
// than its table follows. A v2 spec on a v1 table: with migrate the relay pods' init
// container upgrades it (docs/operations.md, "Upgrading a table to contract v2"), so
// this lasts until the first new pod's migrate has renamed the table; without migrate
// the workers run the v1 loop the table follows, which is not what the spec says,
// until somebody runs the upgrade. A v1 spec on a v2 table (upgraded by hand): with
// migrate the init container's `migrate --contract v1` refuses the table, so no new
// pod starts until the spec says v2; without migrate it is no problem, the relay picks
// its loop from the table. nil otherwise.
func contractProblem(src outboxv1.PostgresSource, table pgident.Table, c schema.Contract) *refProblem {
	if !src.V2() && src.Migrate && c.Version == schema.ContractV2 {
		return &refProblem{outboxv1.ReasonContractMismatch, fmt.Sprintf(
			"outbox table %s follows table contract v2 and spec.source.contract is v1: the relay pods' migrate init container "+
				"refuses to turn it back into v1; set spec.source.contract: v2", table)}
	}
	if !src.V2() || c.Version != schema.ContractV1 {
		return nil
	}
	todo := "run `relayworker migrate --contract v2` against it (docs/operations.md, \"Upgrading a table to contract v2\")"
	if src.Migrate {
		todo = "the relay pods' migrate init container upgrades it (if a new pod's init container fails, its log says why)"
	}
	return &refProblem{outboxv1.ReasonContractMismatch, fmt.Sprintf(
		"outbox table %s follows table contract v1 and spec.source.contract is v2: %s; "+
			"or set spec.source.contract back to v1 while the table is v1", table, todo)}
}
