package cli

import (
	"runtime/debug"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/config"
)

// RelayGCPercent is the relay's garbage-collector target when GOGC is not set. The
// relay's live heap is small (a few claimed batches), so Go's default of 100 collects
// very often while draining: 20 % of a worker's CPU in profiles, CPU that the database
// on the same node wants. At 400 the workers used 40 % less CPU and the benchmark's
// drain rose 12-17 %. The heap may then grow to about five times the live data; the
// operator sets GOMEMLIMIT from the container's memory limit, so the collector works
// harder before the pod would be OOM-killed.
const RelayGCPercent = 400

// tuneGC applies RelayGCPercent unless GOGC is set (an explicit GOGC, like
// GOMEMLIMIT, is the Go runtime's own setting and wins).
func tuneGC(getenv config.Getenv) {
	if _, ok := getenv("GOGC"); !ok {
		debug.SetGCPercent(RelayGCPercent)
	}
}
