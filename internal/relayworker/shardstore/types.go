// types.go: what the v2 relay loop reads, publishes and hands back. A loop is:
// Tick (when caught up) -> Read -> publish the events that are not Held -> PlanHolds
// -> Advance; DueHolds -> publish -> Settle for the hold table; Rebalance between
// batches.

package shardstore

import (
	"time"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
)

// Event is one outbox event a read returned: the row the publisher turns into a
// Kafka message (publish.Format.Message(&ev.Row)) and where it sits in its shard.
type Event struct {
	event.Row
	// Shard is the event's shard: every version of an aggregate is in one shard.
	Shard int16
	// Seq is the insert sequence number: the order within a shard's window.
	Seq int64
	// LoTick is where the shard's window starts: the advance of a window read in
	// parts keeps it.
	LoTick int64
	// HiTick is the tick the shard's window was read against, and HiStamp that tick's
	// identity (TickStamp): the advance moves the cursor only while the tick of that
	// number is still the one read under.
	HiTick  int64
	HiStamp int64
	// Token is the lease token the shard was read under; the advance and any hold
	// row of the event are fenced by it.
	Token string
	// Held: the event's aggregate has an open RETRY or HELD row in the hold table
	// (an older version waits for a retry). Publishing it would overtake that
	// version: the relay must not publish it, PlanHolds makes it a HELD row.
	Held bool
}

// AggregateKey identifies an aggregate: the unit of version order.
type AggregateKey struct{ Type, ID string }

// Key is the event's aggregate.
func (e *Event) Key() AggregateKey { return AggregateKey{e.AggregateType, e.AggregateID} }

// Window is one shard's part of a batch: where its cursor goes once the batch's
// events are published (or in the hold table).
type Window struct {
	Shard   int16
	Token   string
	LoTick  int64 // where the window starts
	HiTick  int64
	HiStamp int64 // HiTick's identity (TickStamp)
	// Last is the seq of the shard's last event in the batch (0: none, only the
	// sentinel that closes a window read in parts).
	Last int64
	// Done: the window was read to its end, so the advance closes it (its new cursor:
	// lo_tick = HiTick, pos NULL); otherwise the next read continues after Last
	// against the same HiTick (lo_tick = LoTick, hi_tick = HiTick, pos = Last).
	Done bool
	// Events is how many of the batch's events are the shard's.
	Events int
}

// Batch is what one Read returned.
type Batch struct {
	// Events in read order: shard after shard, each shard's in seq order.
	Events []Event
	// Windows, one per shard the batch touched, in read order.
	Windows []Window
	// Next is the shard the next Read should start with (round robin): the last
	// shard of this batch.
	Next int16
}

// Advance is what the relay hands back after publishing a batch.
type Advance struct {
	// Windows are the batch's windows (Batch.Windows), unchanged.
	Windows []Window
	// Partitions and Offsets are the published events' Kafka partitions and offsets,
	// and Seqs their seq numbers, in publish order: the batch log's trace from an
	// event (its seq) to its message. The three have one length.
	Partitions []int32
	Offsets    []int64
	Seqs       []int64
	// Holds are the events of the batch that go to the hold table instead of being
	// published now (PlanHolds). They are written in the statement that moves the
	// cursor past them, and only for shards it moves.
	Holds []Hold
}

// Hold is a hold-table row the advance writes: the outbox row, copied by event id,
// and its failure state.
type Hold struct {
	EventID string
	// State is schema.StatusRetry, StatusDead or StatusHeld.
	State string
	// Attempts counted so far (0 for a RETRY that was not tried: the publish stopped
	// before it; 0 for HELD).
	Attempts int
	// RetryIn: a RETRY row is due this long after the advance (database clock).
	RetryIn time.Duration
	Code    string
	Message string
}

// Advanced is what an Advance did.
type Advanced struct {
	// Shards are the shards whose cursor moved. Fewer than Advance.Windows: the
	// others' leases are lost, their events will be read again by their new owner,
	// and the worker must stop publishing them.
	Shards []int16
	// Stale are the shards of Shards' complement whose HiTick is no longer the tick
	// read under (HiStamp differs: a PostgreSQL crash lost an asynchronously
	// committed tick and a new one took its number). Their leases are not lost: the
	// worker reads them again.
	Stale []int16
	// Holds is how many hold rows were written.
	Holds int
	// Batch is the batch log row's id (0 when no shard moved).
	Batch int64
}

// HoldRow is a hold-table row a DueHolds read returned.
type HoldRow struct {
	// Event is the copy of the event; its Token is the token that holds its shard
	// now (Settle is fenced by it), HiTick is 0 and Held false.
	Event
	State         string // schema.StatusRetry or StatusHeld (due rows are never DEAD)
	Attempts      int
	NextAttemptAt time.Time
	ErrorCode     string
	ErrorMessage  string
	HeldAt        time.Time
	UpdatedAt     time.Time
}

// Settlement is what happens to a hold row after the relay tried it: Transition
// decides it.
type Settlement struct {
	EventID string
	// Token is the HoldRow's token: the settlement applies only while it holds the shard.
	Token string
	// Delete: the event was published; the row goes (and the HELD rows behind it
	// become due).
	Delete bool
	// Logged: a deleted row's Kafka Partition and Offset go to the batch log with its
	// seq (a row of no shard), so a trace finds an event sent from the hold table.
	Logged    bool
	Partition int32
	Offset    int64
	// State is the row's new state when it stays (RETRY, DEAD or HELD).
	State string
	// CountAttempt adds one to attempts.
	CountAttempt bool
	// RetryIn: a RETRY row is due again this long after the settle.
	RetryIn time.Duration
	Code    string
	Message string
}

// Lease is one shard this worker holds and the token it holds it under.
type Lease struct {
	Shard int16
	Token string
}
