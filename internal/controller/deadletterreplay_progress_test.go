package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	outboxv1 "github.com/outbox-operator/outbox-operator/api/v1alpha1"
)

func TestSetProgress(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name              string
		phase             string
		started           bool
		matched, replayed int64
		elapsed           time.Duration
		wantRate          int64
		wantETA           string
	}{
		{"not started", outboxv1.ReplayPending, false, 100, 0, time.Minute, 0, ""},
		{"nothing replayed yet", outboxv1.ReplayRunning, true, 100, 0, time.Minute, 0, ""},
		{"half way", outboxv1.ReplayRunning, true, 1000, 500, 50 * time.Second, 10, "50s"},
		{"slow", outboxv1.ReplayRunning, true, 10000, 100, 100 * time.Second, 1, "2h45m0s"},
		{"finished", outboxv1.ReplaySucceeded, true, 1000, 1000, 100 * time.Second, 10, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &outboxv1.DeadLetterReplayStatus{Phase: tc.phase, Matched: tc.matched, Replayed: tc.replayed,
				EstimatedTimeRemaining: "stale", ReplayedPerSecond: 99}
			if tc.started {
				st.StartTime = &metav1.Time{Time: start}
			}
			setProgress(st, -1, start.Add(tc.elapsed))
			if st.ReplayedPerSecond != tc.wantRate || st.EstimatedTimeRemaining != tc.wantETA {
				t.Fatalf("rate %d eta %q, want %d %q", st.ReplayedPerSecond, st.EstimatedTimeRemaining, tc.wantRate, tc.wantETA)
			}
		})
	}
}

// TestSetProgressKeepsFiguresWithoutProgress: a pass that saw no new replayed event
// keeps the figures, so the status is not rewritten for the clock alone.
func TestSetProgressKeepsFiguresWithoutProgress(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	st := &outboxv1.DeadLetterReplayStatus{Phase: outboxv1.ReplayRunning, Matched: 1000, Replayed: 500,
		StartTime: &metav1.Time{Time: start}}
	setProgress(st, 0, start.Add(50*time.Second))
	rate, eta := st.ReplayedPerSecond, st.EstimatedTimeRemaining
	setProgress(st, 500, start.Add(65*time.Second))
	if st.ReplayedPerSecond != rate || st.EstimatedTimeRemaining != eta || eta == "" {
		t.Fatalf("figures moved without progress: %d %q, were %d %q", st.ReplayedPerSecond, st.EstimatedTimeRemaining, rate, eta)
	}
}
