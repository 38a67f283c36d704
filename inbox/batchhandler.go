package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// BatchHandlerFunc applies the messages of one batch inside tx in one call, so an
// application can apply them with one multi-row statement instead of one statement
// per message (docs/consumers.md, "Throughput"). msgs are the messages of the batch
// that must run, in offset order: the dedup row and the version guard have already
// dropped duplicates and stale versions, so msgs never holds an event id twice, but
// it may hold several (increasing) versions of one aggregate; a multi-row upsert must
// fold those into one row (ON CONFLICT cannot touch a row twice in one statement).
//
// Return nil or one result ref per message (stored as result_ref, as a HandlerFunc's
// return value). On an error the whole batch rolls back and is handled again one
// message at a time, fn then being called with one message each, so only the failing
// message is retried and parked, by the class of its error (Retryable, Permanent,
// Waiting, as for a HandlerFunc).
type BatchHandlerFunc func(ctx context.Context, tx *sql.Tx, msgs []Message) (resultRefs []string, err error)

// NewBatchConsumer is NewConsumer for a BatchHandlerFunc: each batch of up to
// o.BatchSize messages calls fn once, inside the batch's one transaction.
func NewBatchConsumer(s *Store, fn BatchHandlerFunc, o Options) (*Consumer, error) {
	if fn == nil {
		return nil, errors.New("inbox: NewBatchConsumer needs a BatchHandlerFunc")
	}
	c, err := NewConsumer(s, fn.one, o)
	if err != nil {
		return nil, err
	}
	c.batchFn = fn
	return c, nil
}

// one handles a single message with fn: a batch of one, for the one-at-a-time
// fallback, replays and BatchSize 1.
func (fn BatchHandlerFunc) one(ctx context.Context, tx *sql.Tx, m Message) (string, error) {
	refs, err := fn(ctx, tx, []Message{m})
	if err != nil {
		return "", err
	}
	if err := checkRefs(refs, 1); err != nil {
		return "", err
	}
	if len(refs) == 1 {
		return refs[0], nil
	}
	return "", nil
}

func checkRefs(refs []string, n int) error {
	if len(refs) != 0 && len(refs) != n {
		return Permanent(fmt.Errorf("inbox: the batch handler returned %d result refs for %d messages (want none or one each)", len(refs), n))
	}
	return nil
}

// callBatch runs fn over msgs and turns a panic into a permanent error (see
// callHandler); it returns one ref per message.
func callBatch(ctx context.Context, tx *sql.Tx, msgs []Message, fn BatchHandlerFunc) (refs []string, err error) {
	defer func() {
		if p := recover(); p != nil {
			refs, err = nil, fmt.Errorf("%w (%T)", errPanic, p)
		}
	}()
	if refs, err = fn(ctx, tx, msgs); err != nil {
		return nil, err
	}
	if err := checkRefs(refs, len(msgs)); err != nil {
		return nil, err
	}
	if len(refs) == 0 {
		refs = make([]string, len(msgs))
	}
	return refs, nil
}
