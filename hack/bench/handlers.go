// handlers.go: the business handlers the consumer run compares. Each applies the same
// change, the upsert of the event's account in balance (events + 1, the version), in
// the consumer's transaction; they differ only in how they talk to PostgreSQL.

package main

import (
	"context"
	"database/sql"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/inbox"
)

type handlerKind int

const (
	prepared    handlerKind = iota // one prepared statement per message (tx.StmtContext)
	plainExec                      // one tx.ExecContext with arguments per message
	noop                           // nothing: the library's own cost
	batchUpsert                    // one multi-row upsert per batch (inbox.NewBatchConsumer)
)

const upsertSQL = `INSERT INTO balance AS b VALUES ($1, 1, $2)
ON CONFLICT (account) DO UPDATE SET events = b.events + 1, version = EXCLUDED.version`

// batchUpsertSQL folds a batch's events per account: ON CONFLICT cannot touch a row
// twice in one statement, and a batch holds several versions of an account.
const batchUpsertSQL = `INSERT INTO balance AS b
SELECT account, count(*), max(version) FROM unnest($1::text[], $2::bigint[]) AS t(account, version) GROUP BY account
ON CONFLICT (account) DO UPDATE SET events = b.events + EXCLUDED.events, version = EXCLUDED.version`

type consumerMaker func(*inbox.Store, inbox.Options) (*inbox.Consumer, error)

// handlerFor returns how to make a consumer with the handler of kind, and what to
// close after the run.
func handlerFor(kind handlerKind, db *sql.DB) (consumerMaker, func(), error) {
	one := func(fn inbox.HandlerFunc) consumerMaker {
		return func(st *inbox.Store, o inbox.Options) (*inbox.Consumer, error) { return inbox.NewConsumer(st, fn, o) }
	}
	switch kind {
	case prepared:
		upsert, err := db.Prepare(upsertSQL)
		if err != nil {
			return nil, nil, err
		}
		return one(func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
			_, err := tx.StmtContext(ctx, upsert).ExecContext(ctx, m.AggregateID, m.AggregateVersion)
			return "", err
		}), func() { upsert.Close() }, nil
	case plainExec:
		return one(func(ctx context.Context, tx *sql.Tx, m inbox.Message) (string, error) {
			_, err := tx.ExecContext(ctx, upsertSQL, m.AggregateID, m.AggregateVersion)
			return "", err
		}), func() {}, nil
	case noop:
		return one(func(context.Context, *sql.Tx, inbox.Message) (string, error) { return "", nil }), func() {}, nil
	}
	return func(st *inbox.Store, o inbox.Options) (*inbox.Consumer, error) {
		return inbox.NewBatchConsumer(st, applyBatch, o)
	}, func() {}, nil
}

// applyBatch is the batch handler: one statement for the whole batch.
func applyBatch(ctx context.Context, tx *sql.Tx, msgs []inbox.Message) ([]string, error) {
	accounts, versions := make([]string, len(msgs)), make([]int64, len(msgs))
	for i, m := range msgs {
		accounts[i], versions[i] = m.AggregateID, m.AggregateVersion
	}
	_, err := tx.ExecContext(ctx, batchUpsertSQL, pq.Array(accounts), pq.Array(versions))
	return nil, err
}
