// Package backoff computes bounded exponential retry delays with jitter for the relay.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff: the n-th retry (n >= 1) waits a random duration
// in [d/2, d] with d = min(Max, Min * 2^(n-1)) ("equal jitter": the delay still grows
// with every attempt, yet workers retrying the same outage do not stampede together).
type Policy struct {
	Min time.Duration
	Max time.Duration
	// Rand returns a float in [0,1); nil uses math/rand/v2.
	Rand func() float64
}

// Ceiling is the un-jittered delay for retry number n (1-based).
func (p Policy) Ceiling(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	d := p.Min
	for i := 1; i < n; i++ {
		if d >= p.Max/2 {
			return p.Max
		}
		d *= 2
	}
	if d > p.Max {
		d = p.Max
	}
	return d
}

// Delay is the jittered delay for retry number n (1-based).
func (p Policy) Delay(n int) time.Duration {
	c := p.Ceiling(n)
	r := p.Rand
	if r == nil {
		r = rand.Float64
	}
	half := c / 2
	return half + time.Duration(r()*float64(c-half))
}

// ForAge is a jittered delay that grows with how long something has been waiting
// rather than with an attempt count: the ceiling is age/2, bounded by [Min, Max]. Used
// while waiting for a missing topic, which must not use up the attempt budget; each
// wait is about half the age so far, so the checks thin out geometrically.
func (p Policy) ForAge(age time.Duration) time.Duration {
	c := age / 2
	if c < p.Min {
		c = p.Min
	}
	if c > p.Max {
		c = p.Max
	}
	r := p.Rand
	if r == nil {
		r = rand.Float64
	}
	half := c / 2
	return half + time.Duration(r()*float64(c-half))
}
