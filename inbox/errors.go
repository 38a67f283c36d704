package inbox

import (
	"errors"
	"fmt"
)

// Class says what a consumer does with a handler error (docs/architecture.md,
// "Consumers"). A handler picks the class by wrapping its error with Retryable,
// Permanent or Waiting; an error it does not wrap is Retryable: an unknown failure is
// tried again a bounded number of times, then parked, never dropped.
type Class int

const (
	// ClassRetryable: a passing technical fault (a lock timeout, a downstream that
	// blinked). Retried in place with exponential backoff and jitter, up to
	// Options.MaxAttempts, then parked with code "retries_exhausted".
	ClassRetryable Class = iota + 1
	// ClassPermanent: the message can never succeed as it is (it cannot be decoded, the
	// business rules reject it). Parked at once with code "permanent".
	ClassPermanent
	// ClassWaiting: the message depends on something that has not happened yet (an
	// event still on its way, a fact another system has not written). Retried with the
	// longer WaitBackoff, up to MaxWaitAttempts, then parked with code "wait_timeout".
	ClassWaiting
)

func (c Class) String() string {
	switch c {
	case ClassRetryable:
		return "retryable"
	case ClassPermanent:
		return "permanent"
	case ClassWaiting:
		return "waiting"
	}
	return "unknown"
}

// Error codes a parked message carries (parked.error_code). They are API: alerts and
// Replay selectors match on them.
const (
	CodeRetriesExhausted  = "retries_exhausted"
	CodePermanent         = "permanent"
	CodeWaitTimeout       = "wait_timeout"
	CodePayloadConflict   = "payload_conflict"
	CodeInvalidMessage    = "invalid_message"
	CodeHandlerPanic      = "handler_panic"
	CodePredecessorParked = "predecessor_parked"
	CodeVersionGap        = "version_gap"
)

type classified struct {
	class Class
	err   error
}

func (c *classified) Error() string { return c.err.Error() }
func (c *classified) Unwrap() error { return c.err }

// Retryable marks err as a passing fault: retry in place, then park.
func Retryable(err error) error { return wrapClass(ClassRetryable, err) }

// Permanent marks err as one no retry can fix: park at once.
func Permanent(err error) error { return wrapClass(ClassPermanent, err) }

// Waiting marks err as "a condition has not happened yet": retry later, then park.
func Waiting(err error) error { return wrapClass(ClassWaiting, err) }

func wrapClass(c Class, err error) error {
	if err == nil {
		return nil
	}
	return &classified{class: c, err: err}
}

// ClassOf returns the class of a handler error: the outermost Retryable, Permanent or
// Waiting wrapper, ClassPermanent for a payload conflict or an invalid message, and
// ClassRetryable for anything else.
func ClassOf(err error) Class {
	var c *classified
	switch {
	case errors.As(err, &c):
		return c.class
	case errors.Is(err, ErrPayloadConflict), errors.Is(err, ErrInvalidMessage), errors.Is(err, errPanic):
		return ClassPermanent
	}
	return ClassRetryable
}

// parkCode is the error code recorded when err ends a message's attempts.
func parkCode(err error) string {
	switch {
	case errors.Is(err, ErrPayloadConflict):
		return CodePayloadConflict
	case errors.Is(err, ErrInvalidMessage):
		return CodeInvalidMessage
	case errors.Is(err, errPanic):
		return CodeHandlerPanic
	case errors.Is(err, errVersionGap):
		return CodeVersionGap
	case errors.Is(err, errPredecessorParked):
		return CodePredecessorParked
	}
	switch ClassOf(err) {
	case ClassPermanent:
		return CodePermanent
	case ClassWaiting:
		return CodeWaitTimeout
	}
	return CodeRetriesExhausted
}

var (
	errPanic             = errors.New("inbox: handler panicked")
	errVersionGap        = errors.New("inbox: version gap")
	errPredecessorParked = errors.New("inbox: predecessor parked")
)

// ErrStore wraps a failure of the consumer's own database statements (begin, dedup,
// park, commit). It is no fault of the message: Run retries it forever with backoff
// and never parks the message for it.
type ErrStore struct{ Err error }

func (e *ErrStore) Error() string { return "inbox: consumer database: " + e.Err.Error() }
func (e *ErrStore) Unwrap() error { return e.Err }

func storeErr(format string, args ...any) error {
	return &ErrStore{Err: fmt.Errorf(format, args...)}
}
