package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/segmentio/kafka-go"
)

// Fetcher is the part of *kafka.Reader that Consume uses.
type Fetcher interface {
	FetchMessage(ctx context.Context) (kafka.Message, error)
	CommitMessages(ctx context.Context, msgs ...kafka.Message) error
}

// Consume reads messages with FetchMessage, handles each with Handle, and commits the
// offset only after the local transaction committed. It never uses ReadMessage: with
// a consumer group that commits before processing and loses messages on a crash.
//
// It returns when ctx ends, or with the first error it cannot get past: a handler
// error, a payload conflict or an invalid message. The offset of that message is not
// committed, so the next run sees it again: fix the cause (or the handler) and restart.
// observe, if not nil, sees every outcome (for metrics such as dedup_hit_total).
func Consume(ctx context.Context, r Fetcher, s *Store, fn HandlerFunc, observe func(Message, Outcome)) error {
	for {
		km, err := r.FetchMessage(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return ctx.Err()
			}
			return fmt.Errorf("inbox: fetch: %w", err)
		}
		m, err := FromKafka(km)
		if err != nil {
			return err
		}
		outcome, err := s.Handle(ctx, m, fn)
		if err != nil {
			return err
		}
		if observe != nil {
			observe(m, outcome)
		}
		if err := r.CommitMessages(ctx, km); err != nil {
			// The effect is committed; a redelivery will be a Duplicate.
			return fmt.Errorf("inbox: commit offset of event %s: %w", m.EventID, err)
		}
	}
}
