// Package inbox is the consumer side of outbox-operator: idempotent, version-guarded
// consumption of the events the relay publishes. A consumer's business change and its
// dedup row commit in ONE local transaction, and the Kafka offset is committed only
// after that transaction, so a crash anywhere means a redelivery that the dedup row
// absorbs, never a lost or doubled effect. The design is docs/architecture.md,
// "Consumers"; how to use it is docs/consumers.md.
//
// The files, by concern:
//
// Consume loop: reading, handling and committing.
//   - consumer.go: Consumer, NewConsumer, Consume and Run; the lag gauges.
//   - options.go: Options and their defaults.
//   - router.go: the router fetches and routes each message to its partition's lane;
//     a lane handles its messages in offset order.
//   - handle.go: a lane's batch: one transaction, else one message at a time,
//     retried by the error's class; passing faults of the consumer database waited out.
//   - batch.go: one transaction for a run of distinct messages.
//   - batchhandler.go: BatchHandlerFunc and NewBatchConsumer.
//   - committer.go: offsets committed after the transactions, many lanes' at once.
//   - leftovers.go: messages a Run fetched and did not commit, for the next Run on
//     the same reader (a Run on a new reader releases them).
//   - message.go: Message, the contract headers, FromKafka (native or CloudEvents).
//   - errors.go: the error classes (Retryable, Waiting, Permanent) and park codes.
//   - metrics.go, unhandled.go: the Prometheus collectors, and the oldest fetched
//     message not yet handled.
//
// Dedup store: the dedup row and the version guard (Store).
//   - store.go: Store, New, Migrate, Handle.
//   - claim.go, claim_sql.go: steps 1 to 3 of Handle (dedup row, hash check, version
//     guard) in one statement, for one message or a batch.
//
// Parking: what could not be handled, kept with the message.
//   - park.go: parking a message, the dead-letter copy, HoldAggregateOnPark.
//   - parked.go: the parking and replay tables and the park statement.
//   - parked_list.go: Parked, the open parked messages.
//
// Replay: handling parked messages again with the application's handler.
//   - replay.go: Consumer.Replay and a replay's run.
//   - replayreq.go: RequestReplay, FindReplay, ReplayStatus: replay requests in the table.
//   - replayserve.go: a running Consumer takes its group's requests.
//   - replaybeat.go: a running replay's heartbeat and its waits for the database.
//
// Command outbox: side effects outside the consumer's database.
//   - commands.go: Commands, the command table and Enqueue (in the handler's transaction).
//   - dispatch.go: Dispatch, which claims due commands under a lease and makes the calls.
package inbox
