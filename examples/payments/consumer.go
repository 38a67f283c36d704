package payments

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/inbox"
)

// NewConsumer returns the inbox consumer of group: its own Store (dedup rows,
// versions and parked messages are per group, so the groups never wait for one
// another) and handler fn.
func NewConsumer(db *sql.DB, group string, fn inbox.HandlerFunc, o inbox.Options) (*inbox.Consumer, error) {
	store, err := inbox.New(db, Schema, group)
	if err != nil {
		return nil, fmt.Errorf("payments: consumer %s: %w", group, err)
	}
	c, err := inbox.NewConsumer(store, fn, o)
	if err != nil {
		return nil, fmt.Errorf("payments: consumer %s: %w", group, err)
	}
	return c, nil
}

// ReaderConfig is a group reader of topic as the inbox needs it.
func ReaderConfig(brokers []string, group, topic string) kafka.ReaderConfig {
	return kafka.ReaderConfig{
		Brokers: brokers, GroupID: group, Topic: topic,
		StartOffset: kafka.FirstOffset, // a new group reads the whole topic: it skips no payment
		// CommitInterval stays 0: commits are synchronous, and the inbox makes them
		// only after its transaction committed.
		MaxWait:           250 * time.Millisecond,
		HeartbeatInterval: time.Second,
	}
}

// RunConsumer runs c on r until ctx ends. Run returns early when the reader or an
// offset commit fails; the messages it had fetched and not committed stay with c for
// r, so running c again on the SAME r handles them first (as Duplicates when their
// transaction had committed) instead of skipping them.
func RunConsumer(ctx context.Context, log logr.Logger, group string, c *inbox.Consumer, r inbox.Fetcher, delay time.Duration) error {
	for restart := 1; ; restart++ {
		err := c.Run(ctx, r)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Error(err, "consumer stopped; running it again on the same reader", "consumerGroup", group, "restart", restart)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// isStop reports whether err only says that ctx ended.
func isStop(err error) bool {
	return err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
