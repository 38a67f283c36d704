package inbox

import (
	"context"
	"fmt"
)

// tryRun handles distinct messages in one transaction: one claim statement for all
// of them, each handler in order, one statement for their results, one commit. Any
// error rolls the whole run back; the caller then sorts it out message by message.
func (c *Consumer) tryRun(ctx context.Context, run []incoming) ([]Outcome, error) {
	tx, err := c.s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, storeErr("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	msgs := make([]Message, len(run))
	for i, in := range run {
		msgs[i] = in.m
	}
	claims, err := c.s.claimBatch(ctx, tx, msgs)
	if err != nil {
		return nil, err
	}
	outcomes := make([]Outcome, len(run))
	var results []finishRow
	var toRun []Message // for a batch handler: the messages it applies, in order
	for i, m := range msgs {
		outcomes[i] = claims[i].outcome
		switch claims[i].outcome {
		case Duplicate:
			continue
		case Stale:
			results = append(results, finishRow{eventID: m.EventID, stale: true})
			continue
		case Gap:
			if c.o.WaitForGaps {
				return nil, fmt.Errorf("%w: event %s", errVersionGap, m.EventID)
			}
		}
		if c.batchFn != nil {
			toRun = append(toRun, m)
			continue
		}
		ref, err := callHandler(run[i].ctx, tx, m, c.fn)
		if err != nil {
			return nil, &handlerError{eventID: m.EventID, err: err}
		}
		results = append(results, finishRow{eventID: m.EventID, ref: ref})
	}
	if len(toRun) > 0 {
		refs, err := callBatch(ctx, tx, toRun, c.batchFn)
		if err != nil {
			return nil, &handlerError{eventID: fmt.Sprintf("%s (batch of %d)", toRun[0].EventID, len(toRun)), err: err}
		}
		for i, m := range toRun {
			results = append(results, finishRow{eventID: m.EventID, ref: refs[i]})
		}
	}
	if err := c.s.finish(ctx, tx, results); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, storeErr("commit %d events: %w", len(run), err)
	}
	return outcomes, nil
}
