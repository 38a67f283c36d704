package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/segmentio/kafka-go"
)

// Options tune a Consumer. The zero value is a good start: one message per
// transaction, five attempts for a retryable error, later versions of an aggregate
// keep flowing past a parked one, gaps are applied and reported.
type Options struct {
	// MaxAttempts bounds the tries of a message whose handler returns a retryable
	// error (default 5); the last failure parks it with code "retries_exhausted".
	MaxAttempts int
	// Backoff is the delay before the second try (default 100ms); it doubles per
	// try, with jitter, up to MaxBackoff (default 5s).
	Backoff, MaxBackoff time.Duration
	// MaxWaitAttempts bounds the tries of a message whose handler says Waiting
	// (default 10), spaced by WaitBackoff (default 1s, doubling up to MaxBackoff x 4).
	MaxWaitAttempts int
	WaitBackoff     time.Duration
	// BatchSize is how many messages share one local transaction and one offset
	// commit (default 1). A batch in which any handler fails is rolled back and
	// handled again one message at a time, so one bad message costs its batch a
	// second pass, never an effect.
	BatchSize int
	// BatchLinger is how long a batch waits for more messages once it has one
	// (default 2ms). It bounds the latency batching adds.
	BatchLinger time.Duration
	// HoldAggregateOnPark parks the later versions of an aggregate behind a parked
	// one (code "predecessor_parked") until it is replayed, for projections that
	// must see every version in order. Off: they flow, and the version guard keeps
	// the projection right, as the relay does with DEAD events.
	HoldAggregateOnPark bool
	// WaitForGaps treats a version past last applied + 1 as Waiting (retried, then
	// parked with code "version_gap") instead of applying it with outcome Gap.
	WaitForGaps bool
	// DeadLetter, if set, also receives every parked message (same key, value and
	// headers, plus dlq_error_code and dlq_source headers) on DeadLetterTopic. The
	// parking table stays the record: a failed dead-letter write is logged, and the
	// message stays parked.
	DeadLetter      MessageWriter
	DeadLetterTopic string
	// Metrics, if set, counts every outcome (see NewMetrics).
	Metrics *Metrics
	// Log receives one line per retry, park and database fault (keys: consumerGroup,
	// eventId, topic, partition, offset, attempt, code, and source: "handler" or
	// "consumer database", who failed). Never payloads.
	Log logr.Logger
	// Observe, if set, sees every message's outcome after its transaction committed.
	// It is called from each partition's lane, so possibly from several goroutines at
	// once: it must be safe for that, and quick (it runs before the lane's next batch).
	Observe func(Message, Outcome)
	// MaxStoreWait bounds how long one message (or batch) waits out passing faults of
	// inbox's own statements (dedup row, version guard, park, commit: a deadlock, a
	// lock or statement timeout, a server short of resources) without counting them
	// as tries (default 5m, longer than a database fail-over). After it, each such
	// fault counts as a Retryable try, so one that never passes (a lock held forever
	// on the message's version row) parks the message instead of stalling its
	// partition; a park that keeps failing for as long ends Run with an error naming
	// the message. An unreachable consumer database (a lost or refused connection) is
	// not bounded by it: that is waited for as long as it lasts, the partition
	// stopped, since a healthy message must not be parked for it (and a park could not
	// be written). Handler errors never wait uncounted: they count by their class.
	MaxStoreWait time.Duration
	// ReplayPoll is how often Run looks for replay requests (RequestReplay, e.g. from
	// a DeadLetterReplay); default 5s, negative: never.
	ReplayPoll time.Duration
	// ReplayLease is how long a running replay may go without a heartbeat before
	// another consumer of the group takes it over (its consumer died mid-replay);
	// default 1m. A running replay heartbeats every ReplayLease/4, also while a long
	// handler runs. Give every consumer of a group the same value.
	ReplayLease time.Duration
}

// MessageWriter is the part of *kafka.Writer a dead-letter topic needs.
type MessageWriter interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

func (o Options) withDefaults() (Options, error) {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defInt(&o.MaxAttempts, 5)
	defInt(&o.MaxWaitAttempts, 10)
	defInt(&o.BatchSize, 1)
	def(&o.Backoff, 100*time.Millisecond)
	def(&o.MaxBackoff, 5*time.Second)
	def(&o.WaitBackoff, time.Second)
	def(&o.BatchLinger, 2*time.Millisecond)
	def(&o.ReplayPoll, 5*time.Second)
	def(&o.MaxStoreWait, 5*time.Minute)
	def(&o.ReplayLease, time.Minute)
	switch {
	case o.MaxAttempts < 1, o.MaxWaitAttempts < 1:
		return o, errors.New("inbox: MaxAttempts and MaxWaitAttempts must be at least 1")
	case o.BatchSize < 1 || o.BatchSize > 10000:
		return o, fmt.Errorf("inbox: BatchSize %d is not in [1, 10000]", o.BatchSize)
	case o.Backoff < 0 || o.MaxBackoff < o.Backoff || o.WaitBackoff < 0 || o.BatchLinger < 0 || o.MaxStoreWait < 0:
		return o, errors.New("inbox: backoffs must be positive, and MaxBackoff at least Backoff")
	case o.ReplayLease < time.Second:
		return o, fmt.Errorf("inbox: ReplayLease %s is below 1s", o.ReplayLease)
	case (o.DeadLetter == nil) != (o.DeadLetterTopic == ""):
		return o, errors.New("inbox: DeadLetter and DeadLetterTopic go together")
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	return o, nil
}
