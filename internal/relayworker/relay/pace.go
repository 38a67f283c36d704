// pace.go: how long the loop waits before its next claim (internal/relayworker/pace,
// shared with the v2 loop).

package relay

import (
	"time"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/pace"
)

// MinPollInterval is the first wait after a claim that found nothing (pace.MinPollInterval).
const MinPollInterval = pace.MinPollInterval

// pacer is the claim loop's idle back-off.
type pacer = pace.Pacer

func newPacer(max time.Duration) *pacer { return pace.New(max) }
