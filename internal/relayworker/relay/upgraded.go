package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgerr"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// UpgradedError says the table was upgraded to contract v2 under this v1 relay
// (`relayworker migrate --contract v2`, docs/contract-v2.md). The worker stops: a
// relay started again detects the contract and runs the v2 loop. Retrying would only
// fail on the same missing column, and the worker's heartbeat would keep counting it
// as a live worker in the v2 workers' fair share.
type UpgradedError struct{ Table pgident.Table }

func (e *UpgradedError) Error() string {
	return fmt.Sprintf("outbox table %s was upgraded to table contract v2 while this worker ran the v1 relay: start it again (it runs the v2 relay on the table); its claimed rows are relayed from %s",
		e.Table, e.Table.WithSuffix(schema.HoldSuffix))
}

// upgraded says whether err, a failed claim, is a v1 statement on a table that
// follows contract v2 now: only an undefined column makes it ask the table.
func (r *Relay) upgraded(ctx context.Context, err error) bool {
	if !pgerr.Is(err, pgerr.UndefinedColumn) {
		return false
	}
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	got, derr := schema.DetectContract(c, r.db, r.cfg.Table)
	return derr == nil && got.Version >= schema.ContractV2
}
