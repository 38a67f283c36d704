package inbox

import (
	"errors"
	"fmt"

	"github.com/outbox-operator/outbox-operator/internal/pgerr"
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

// ErrStore wraps a failure of the consumer's own database statements (begin, dedup
// row, version guard, park, commit), never a handler's. A passing fault of these
// (pgerr.IsTransient) is waited out without counting a try: a lost or refused
// connection (pgerr.IsConnection) for as long as it lasts, any other (deadlock, lock
// or statement timeout, out of resources) for at most Options.MaxStoreWait per
// message; after that it counts like a Retryable handler error, so a fault that never
// passes parks the message instead of stalling its partition.
type ErrStore struct{ Err error }

func (e *ErrStore) Error() string { return "inbox: consumer database: " + e.Err.Error() }
func (e *ErrStore) Unwrap() error { return e.Err }

func storeErr(format string, args ...any) error {
	return &ErrStore{Err: fmt.Errorf(format, args...)}
}

// handlerError is an error the handler returned. It is classified by its class only
// (ClassOf), whatever it wraps: a handler whose gateway call timed out returns
// context.DeadlineExceeded, and that must be counted and parked in the end, not
// waited out as if the consumer's database were down.
type handlerError struct {
	eventID string
	err     error
}

func (e *handlerError) Error() string {
	return "inbox: handle event " + e.eventID + ": " + e.err.Error()
}
func (e *handlerError) Unwrap() error { return e.err }

// storeFault reports whether err is a passing fault of inbox's own statements: an
// ErrStore around a transient PostgreSQL or connection error, and no handler error.
func storeFault(err error) bool {
	var h *handlerError
	if errors.As(err, &h) {
		return false
	}
	var s *ErrStore
	return errors.As(err, &s) && pgerr.IsTransient(err)
}

// source names who failed, for log lines: "handler" or "consumer database".
func source(err error) string {
	var h *handlerError
	if errors.As(err, &h) {
		return "handler"
	}
	var s *ErrStore
	if errors.As(err, &s) {
		return "consumer database"
	}
	return "message"
}
