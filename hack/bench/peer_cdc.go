// peer_cdc.go: this product in LogicalReplication mode: the same relayworker
// processes with --source-mode=logical-replication. The slot is made right after
// migrate (as the operator makes it before the workers start), so the drain run's
// backlog, bulk-loaded afterwards, reaches the reader through the slot.

package main

import (
	"context"
	"database/sql"

	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/replslot"
)

type cdcPeer struct {
	*relayPeer
	base []string // the relay flags before the slot's name is known
}

func (s *stack) cdc(label string, flags []string) *cdcPeer {
	base := append(append([]string{}, flags...), "--source-mode", contract.SourceLogicalReplication, "--cdc-create-slot=false")
	return &cdcPeer{relayPeer: s.relay(label, base, false), base: base}
}

func (p *cdcPeer) setup(dsn string) error {
	if err := p.relayPeer.setup(dsn); err != nil {
		return err
	}
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	slot := contract.ReplicationName(dbName(dsn), "public", "outbox_event")
	t := pgident.Table{Schema: "public", Name: "outbox_event"}
	if err := replslot.CreatePublication(context.Background(), db, slot, t); err != nil {
		return err
	}
	if _, err := replslot.CreateSlot(context.Background(), db, slot); err != nil {
		return err
	}
	p.relayPeer.flags = append(append([]string{}, p.base...), "--slot", slot)
	return nil
}

// dropSlots removes the inactive slots of database db after a run: a slot left
// behind would hold WAL for the rest of the benchmark.
func (s *stack) dropSlots(db string) {
	_, _ = s.admin.Exec(`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active`, db)
}
