// Package startstop is the one lifecycle of the background loops of the relay and
// the inbox (after River's rivershared/startstop, in its smallest form): Start runs a
// loop in its own goroutine under a context of its own, Stop cancels that context
// and returns only once the loop has returned, so whatever the loop holds
// (connections, locks, a slot) is let go before the caller goes on.
package startstop

import (
	"context"
	"time"
)

// Task is one running loop.
type Task struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs fn in a goroutine with a context derived from ctx: it ends when ctx
// does or when Stop is called.
func Start(ctx context.Context, fn func(context.Context)) *Task {
	ctx, cancel := context.WithCancel(ctx)
	t := &Task{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		defer cancel()
		fn(ctx)
	}()
	return t
}

// Stop cancels the task's context and waits until fn has returned. It may be called
// more than once.
func (t *Task) Stop() {
	t.cancel()
	<-t.done
}

// Wait waits until fn has returned, without asking it to: for a loop that ends on
// its own (its input closed).
func (t *Task) Wait() { <-t.done }

// StopAll cancels every task first, then waits for each, so loops that take a while
// to end do so together rather than one after the other.
func StopAll(tasks ...*Task) {
	for _, t := range tasks {
		t.cancel()
	}
	for _, t := range tasks {
		<-t.done
	}
}

// Sleep waits for d or until ctx ends, whichever comes first: the one wait of the
// background loops (a backoff, a pause, an idle turn), cut short by a stop.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
