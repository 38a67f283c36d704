package freeport

import (
	"net"
	"strconv"
	"testing"
)

// A picked port is below the ephemeral range and can be bound.
func TestPortIsBelowTheEphemeralRangeAndBindable(t *testing.T) {
	for range 20 {
		a, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		_, ps, _ := net.SplitHostPort(a)
		p, _ := strconv.Atoi(ps)
		if p < low || p >= ephemeralLow() {
			t.Fatalf("port %d outside [%d, %d)", p, low, ephemeralLow())
		}
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("bind %s: %v", a, err)
		}
		l.Close()
	}
}
