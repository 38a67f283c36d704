// Package payments is the "payment succeeded" example of outbox-operator: one local
// transaction on the producer side, three independent consumers, and a
// reconciliation that checks every derived result.
//
//   - Shop.HandlePaymentCallback marks an order PAID with a conditional UPDATE and
//     writes a PaymentSucceeded event with the outbox package, in ONE transaction. It
//     never waits for points, SMS or search: the relay publishes the event later.
//   - Three consumer groups read the topic, each with inbox.NewConsumer and its own
//     inbox.Store: points (a balance and a ledger row in the handler's transaction),
//     notification (an SMS command enqueued in the handler's transaction, sent by a
//     rate-limited dispatcher with the event id as idempotency key) and search (a
//     projection row guarded by the aggregate version). A group that is down or
//     parks a message holds up no other group.
//   - Reconcile checks that every PAID order has exactly one points credit, one DONE
//     SMS command and a search row at the order's latest version, or a parked
//     message that says why not.
//
// All tables live in the schema "payments" of one database so that Reconcile can
// join them; in production each consumer owns its database, and each handler here
// touches only its own tables, through the transaction the inbox gives it.
package payments
