package pace

import (
	"testing"
	"time"
)

func TestPacerDoublesFromMinToPollIntervalAndResets(t *testing.T) {
	p := New(100 * time.Millisecond)
	var got []time.Duration
	for i := 0; i < 7; i++ {
		got = append(got, p.Idle())
	}
	want := []time.Duration{5, 10, 20, 40, 80, 100, 100}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("wait %d = %s, want %s (all: %v)", i, got[i], want[i]*time.Millisecond, got)
		}
	}
	p.Reset()
	if d := p.Idle(); d != MinPollInterval {
		t.Fatalf("after reset the first wait is %s, want %s", d, MinPollInterval)
	}
}

func TestPacerNeverWaitsLongerThanAShortPollInterval(t *testing.T) {
	p := New(2 * time.Millisecond)
	for i := 0; i < 3; i++ {
		if d := p.Idle(); d != 2*time.Millisecond {
			t.Fatalf("wait %d = %s, want the 2ms poll interval", i, d)
		}
	}
}
