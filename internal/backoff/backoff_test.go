package backoff

import (
	"testing"
	"time"
)

func TestCeilingGrowsAndCaps(t *testing.T) {
	p := Policy{Min: 500 * time.Millisecond, Max: 5 * time.Second}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		if got := p.Ceiling(i + 1); got != w {
			t.Errorf("Ceiling(%d) = %s, want %s", i+1, got, w)
		}
	}
	if got := p.Ceiling(1000); got != 5*time.Second {
		t.Errorf("Ceiling(1000) = %s (overflow?)", got)
	}
}

func TestDelayWithinEqualJitterBounds(t *testing.T) {
	for _, r := range []float64{0, 0.5, 0.999999} {
		p := Policy{Min: time.Second, Max: time.Minute, Rand: func() float64 { return r }}
		for n := 1; n < 10; n++ {
			c := p.Ceiling(n)
			d := p.Delay(n)
			if d < c/2 || d > c {
				t.Fatalf("Delay(%d)=%s outside [%s,%s]", n, d, c/2, c)
			}
		}
	}
	// Growth: the lowest possible delay of attempt n+1 is at least the highest of n
	// until the cap, so deltas between attempts grow monotonically.
	p := Policy{Min: time.Second, Max: time.Hour}
	for n := 1; n < 8; n++ {
		if p.Ceiling(n+1)/2 < p.Ceiling(n) {
			t.Fatalf("attempt %d may not wait longer than attempt %d", n+1, n)
		}
	}
}

func TestForAgeGrowsWithAgeAndStaysBounded(t *testing.T) {
	p := Policy{Min: 500 * time.Millisecond, Max: time.Minute, Rand: func() float64 { return 1 }}
	cases := []struct{ age, want time.Duration }{
		{0, 500 * time.Millisecond},
		{10 * time.Second, 5 * time.Second},
		{100 * time.Second, 50 * time.Second},
		{time.Hour, time.Minute},
	}
	for _, c := range cases {
		if got := p.ForAge(c.age); got != c.want {
			t.Errorf("ForAge(%s) = %s, want %s", c.age, got, c.want)
		}
	}
	p.Rand = func() float64 { return 0 }
	if got := p.ForAge(10 * time.Second); got != 2500*time.Millisecond {
		t.Errorf("ForAge jitter floor = %s, want 2.5s", got)
	}
}
