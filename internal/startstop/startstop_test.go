package startstop

import (
	"context"
	"testing"
	"time"
)

// within fails the test when f has not returned after a generous bound (a deadlock).
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return", what)
	}
}

func TestStopCancelsAndWaitsForTheLoop(t *testing.T) {
	release := make(chan struct{})
	var ended bool
	task := Start(context.Background(), func(ctx context.Context) {
		<-ctx.Done()
		<-release // still cleaning up
		ended = true
	})
	stopped := make(chan struct{})
	go func() { defer close(stopped); task.Stop() }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while the loop was still running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	within(t, "Stop", func() { <-stopped })
	if !ended {
		t.Fatal("Stop returned before the loop did")
	}
	within(t, "a second Stop", task.Stop)
}

func TestTheParentContextEndsTheLoop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	task := Start(ctx, func(ctx context.Context) { <-ctx.Done() })
	cancel()
	within(t, "Wait after the parent's cancel", task.Wait)
}

func TestWaitDoesNotCancel(t *testing.T) {
	in := make(chan int)
	var cancelled bool
	task := Start(context.Background(), func(ctx context.Context) {
		for range in {
		}
		cancelled = ctx.Err() != nil
	})
	in <- 1
	close(in)
	within(t, "Wait", task.Wait)
	if cancelled {
		t.Fatal("the loop's context was cancelled before its input closed")
	}
}

// StopAll asks every task to stop before it waits for any: here a stops only once b
// was asked to, which a stop-then-wait per task would never let happen.
func TestStopAllCancelsEveryTaskBeforeWaiting(t *testing.T) {
	bCtx := make(chan context.Context, 1)
	b := Start(context.Background(), func(ctx context.Context) { bCtx <- ctx; <-ctx.Done() })
	bc := <-bCtx
	a := Start(context.Background(), func(ctx context.Context) {
		<-ctx.Done()
		<-bc.Done()
	})
	within(t, "StopAll", func() { StopAll(a, b) })
}
