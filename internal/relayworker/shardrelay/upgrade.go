package shardrelay

import (
	"context"

	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/outbox-operator/outbox-operator/internal/startstop"
)

// upgradeWaitReason is the readiness reason while the table's upgrade from v1 copies.
const upgradeWaitReason = "waiting for the upgrade from table contract v1 to finish (relayworker migrate --contract v2)"

// waitUpgrade holds the worker back, before it takes any shard, while the table's
// upgrade from contract v1 is still copying v1 rows into the hold table
// (schema.UpgradeState): until the copy ends, an aggregate's older v1 versions may not
// be in the hold table yet, and its newer v2 events would not be held behind them (a
// reorder). It checks once per poll interval, not ready and live meanwhile, and logs
// when it starts and stops waiting. A failed check is logged and tried again: the
// migrate that finishes the upgrade may be restarting the database connection too.
// It returns when the upgrade is done (or none ran) or ctx ends.
func (r *Relay) waitUpgrade(ctx context.Context) {
	waited := false
	for ctx.Err() == nil {
		u, err := schema.UpgradeState(ctx, r.db, r.cfg.Table)
		switch {
		case err != nil:
			r.m.Errors.WithLabelValues("upgrade").Inc()
			r.log.Error(err, "could not read the table's upgrade state; trying again", "table", r.cfg.Table.String())
		case !u.InProgress():
			if waited {
				r.log.Info("upgrade from contract v1 done; relaying", "table", r.cfg.Table.String(), "copied", u.Copied, "dead", u.Dead)
			}
			return
		case !waited:
			waited = true
			r.health.SetReady(false, upgradeWaitReason)
			r.log.Info("waiting for the upgrade from contract v1 to finish before relaying", "table", r.cfg.Table.String(),
				"from", u.From, "copied", u.Copied)
		}
		r.health.Beat()
		startstop.Sleep(ctx, r.cfg.PollInterval)
	}
}
