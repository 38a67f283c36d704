// workerstatus.go: the worker's row in <table>_workers (docs/worker-contract.md,
// "Worker-status table"), which the operator reads for its BrokerUnavailable
// condition.

package relay

import (
	"context"
	"errors"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/store"
)

// reportWorker writes the worker's broker state and heartbeat to the worker-status
// table (the operator's BrokerUnavailable condition reads it). Best effort: a failure
// only costs the operator's view, never the relay.
func (r *Relay) reportWorker(ctx context.Context) {
	if r.cfg.WorkerID == "" || r.noWorkersTable.Load() {
		return
	}
	st := r.broker()
	c, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	err := r.store.ReportWorker(c, r.cfg.WorkerID, st.Up, st.Code)
	switch {
	case errors.Is(err, store.ErrNoWorkersTable):
		r.noWorkersTable.Store(true)
		r.log.Info("worker-status table missing; broker state is not reported to the operator until `relayworker migrate` runs")
	case err != nil && ctx.Err() == nil:
		r.m.Errors.WithLabelValues("stats").Inc()
	}
}

// removeWorker deletes the worker's row on a clean stop. Best effort, and detached
// from the stop signal that ended Run: a row left behind ages out (the operator
// ignores rows whose heartbeat stopped).
func (r *Relay) removeWorker() {
	if r.cfg.WorkerID == "" || r.noWorkersTable.Load() {
		return
	}
	c, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = r.store.RemoveWorker(c, r.cfg.WorkerID)
}
