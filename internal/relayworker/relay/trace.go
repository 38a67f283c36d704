// trace.go: one OpenTelemetry span per published batch (internal/relayworker/batchspan,
// shared with the v2 loop).

package relay

import "github.com/outbox-operator/outbox-operator/internal/relayworker/batchspan"

// TracerName is the instrumentation scope of the relay's spans.
const TracerName = batchspan.TracerName

var (
	startBatchSpan = batchspan.Start
	endBatchSpan   = batchspan.End
)
