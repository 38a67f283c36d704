// history.go: the drain behind history (-history N): a table that has run for a
// while and not been archived yet. On a v1 table history is SENT rows; on a v2
// table it is rows every shard's cursor has passed: loaded, then one tick taken
// with the relay's own statement and every shard's window moved to start at it,
// the state a relay that drained them leaves (its batch log rows aside).

package main

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/shardstore"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// historyPeer is a peer whose table can hold history before a drain.
type historyPeer interface {
	loadHistory(db *sql.DB, tag string, n int) error
}

// historyRows selects n rows of the producers' columns (tag-h<g>, aggregates of
// their own, ~300-byte payloads).
const historyRows = `SELECT $1 || '-h' || g, 'order', 'hist-' || (g % 10000), g, 'order.changed', 'history', 'hist-' || (g % 10000),
       jsonb_build_object('id', g, 'note', repeat('x', 250)), NULL::jsonb`

// loadHistory fills a v1 table with SENT rows.
func (p *relayPeer) loadHistory(db *sql.DB, tag string, n int) error {
	_, err := db.Exec(`INSERT INTO public.outbox_event (`+relayCols+`, status, sent_at, created_at, next_retry_at)
SELECT h.*, 'SENT', now() - interval '1 hour', now() - interval '2 hours', now() - interval '2 hours'
FROM (`+historyRows+` FROM generate_series(1, $2) g) h`, tag, n)
	if err != nil {
		return fmt.Errorf("load history: %w", err)
	}
	return nil
}

// loadHistory fills a v2 table with rows and moves every shard's cursor past them.
func (p *relayV2Peer) loadHistory(db *sql.DB, tag string, n int) error {
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `INSERT INTO public.outbox_event (`+relayCols+`) `+historyRows+` FROM generate_series(1, $2) g`, tag, n); err != nil {
		return fmt.Errorf("load history: %w", err)
	}
	st, err := shardstore.New(db, shardstore.Options{Table: pgident.Table{Schema: "public", Name: "outbox_event"},
		Shards: schema.DefaultShards, WorkerID: "bench-history"})
	if err != nil {
		return err
	}
	defer st.Close()
	tick, recorded, err := st.Tick(ctx, nil) // holds no shard: closes no window (the INSERT below moves them)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	if !recorded {
		return fmt.Errorf("history: no tick recorded after %d rows", n)
	}
	for _, q := range []string{
		`INSERT INTO public.outbox_event_cursor (shard, lo_tick) SELECT shard, $1 FROM public.outbox_event_lease`,
		`DELETE FROM public.outbox_event_tick WHERE tick < $1`,
	} {
		if _, err := db.ExecContext(ctx, q, tick); err != nil {
			return fmt.Errorf("history: pass every shard's cursor: %w", err)
		}
	}
	return nil
}
