// pace.go: how long the loop waits before its next claim.

package relay

import "time"

// MinPollInterval is the first wait after a claim that found nothing: a worker that
// just drained the table looks again this soon, and doubles the wait on every further
// empty claim up to the poll interval. Plain-SQL producers (no NOTIFY) therefore see
// a few milliseconds of relay latency while events keep coming, and an idle worker
// still runs only about one claim per poll interval.
const MinPollInterval = 5 * time.Millisecond

// pacer is the idle back-off between claims. Any claim that returned rows resets it:
// a short batch (the other worker holds rows, the order guard held some back) says
// nothing about the backlog, so the loop claims again at once instead of sleeping.
type pacer struct {
	min, max time.Duration
	cur      time.Duration
}

func newPacer(max time.Duration) *pacer {
	p := &pacer{min: min(MinPollInterval, max), max: max}
	p.reset()
	return p
}

func (p *pacer) reset() { p.cur = 0 }

// idle returns the wait after an empty claim and grows the next one.
func (p *pacer) idle() time.Duration {
	if p.cur == 0 {
		p.cur = p.min
	} else {
		p.cur = min(p.cur*2, p.max)
	}
	return p.cur
}
