package cli

import (
	"runtime/debug"
	"testing"
)

func TestRelayRaisesGOGCUnlessSet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100)) // restore whatever the test binary had
	tuneGC(func(string) (string, bool) { return "", false })
	if got := debug.SetGCPercent(100); got != RelayGCPercent {
		t.Fatalf("GC percent %d without GOGC, want %d", got, RelayGCPercent)
	}
	tuneGC(func(k string) (string, bool) { return "50", k == "GOGC" })
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GC percent %d with GOGC set, want it left alone (100)", got)
	}
}
