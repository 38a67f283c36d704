// Package pace is the idle back-off of a relay loop between reads (v1's claims, v2's
// window reads): after a read that found nothing the loop waits MinPollInterval,
// doubling on every further empty read up to the poll interval; any read that
// returned events resets it.
package pace

import "time"

// MinPollInterval is the first wait after a read that found nothing: a worker that
// just drained the table looks again this soon, and doubles the wait on every further
// empty read up to the poll interval. Plain-SQL producers (no NOTIFY) therefore see
// a few milliseconds of relay latency while events keep coming, and an idle worker
// still runs only about one read per poll interval.
const MinPollInterval = 5 * time.Millisecond

// WakeLinger is how long a worker woken by NOTIFY waits before reading. Every
// committing producer announces itself and every worker hears it; reading at once
// turned 1,000 events/s into ~480 claims/s of 2 rows each, CPU the database needed
// (a worse p99 than plain polling). Two milliseconds let the burst finish: about
// 25 % fewer claims and p99 18-39 -> 16 ms at 1,000 events/s with the trigger.
const WakeLinger = 2 * time.Millisecond

// Pacer is the idle back-off between reads. Any read that returned rows resets it:
// a short batch says nothing about the backlog, so the loop reads again at once
// instead of sleeping.
type Pacer struct {
	min, max time.Duration
	cur      time.Duration
}

// New is a pacer whose waits grow from MinPollInterval (or max, when shorter) to max.
func New(max time.Duration) *Pacer {
	p := &Pacer{min: min(MinPollInterval, max), max: max}
	p.Reset()
	return p
}

// Reset makes the next wait the shortest again.
func (p *Pacer) Reset() { p.cur = 0 }

// Idle returns the wait after an empty read and grows the next one.
func (p *Pacer) Idle() time.Duration {
	if p.cur == 0 {
		p.cur = p.min
	} else {
		p.cur = min(p.cur*2, p.max)
	}
	return p.cur
}
