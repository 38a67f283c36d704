// workerstatus.go: the worker's row in <table>_workers (docs/worker-contract.md,
// "Worker-status table"), which the operator reads for its BrokerUnavailable
// condition.

package relay

import (
	"context"
	"time"
)

// reportWorker writes the worker's broker state and heartbeat to the worker-status
// table (the operator's BrokerUnavailable condition reads it). Best effort: a failure
// only costs the operator's view, never the relay.
func (r *Relay) reportWorker(ctx context.Context) {
	st := r.broker()
	r.status.Beat(ctx, st.Up, st.Code)
}

// removeWorker deletes the worker's row on a clean stop. Best effort, and detached
// from the stop signal that ended Run: a row left behind ages out (the operator
// ignores rows whose heartbeat stopped).
func (r *Relay) removeWorker() {
	if r.cfg.WorkerID == "" || r.status.Missing() {
		return
	}
	c, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = r.store.RemoveWorker(c, r.cfg.WorkerID)
}
