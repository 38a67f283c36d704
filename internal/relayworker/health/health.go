// Package health serves /healthz (liveness: the relay loop is turning) and /readyz
// (readiness: connected to a primary and able to claim).
package health

import (
	"net/http"
	"sync"
	"time"
)

// State is updated by the relay loop and read by the probes.
type State struct {
	mu       sync.Mutex
	ready    bool
	reason   string
	lastBeat time.Time
	// Stall is how long the loop may go without a beat before /healthz fails.
	Stall time.Duration
}

// New returns a not-ready state.
func New(stall time.Duration) *State {
	return &State{reason: "starting", lastBeat: time.Now(), Stall: stall}
}

// SetReady records readiness and the reason when not ready.
func (s *State) SetReady(ready bool, reason string) {
	s.mu.Lock()
	s.ready, s.reason = ready, reason
	s.mu.Unlock()
}

// Beat records that the loop made progress (a claim attempt or an idle wait ended).
func (s *State) Beat() {
	s.mu.Lock()
	s.lastBeat = time.Now()
	s.mu.Unlock()
}

// Ready reports readiness and the reason when not ready.
func (s *State) Ready() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready, s.reason
}

// Live reports whether the loop beat recently.
func (s *State) Live() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Since(s.lastBeat) <= s.Stall
}

// Handler serves /healthz and /readyz.
func (s *State) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.Live() {
			http.Error(w, "relay loop stalled", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ok, why := s.Ready(); !ok {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
