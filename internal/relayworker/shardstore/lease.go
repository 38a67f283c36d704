// lease.go: shard leases. A worker heartbeats in the workers table (that is what
// "live" means for the fair share), renews what it holds, gives up shards over its
// share at a window boundary, and takes free or expired shards under a fresh token
// per acquisition. One owner per shard is the column itself: the lease row's owner
// holds one token, and every write a worker makes for a shard is fenced by it. How
// long a token's leases last is the token's row (schema.TokenSuffix): a renewal
// writes one row per token, the shard rows are written only when a lease is taken or
// given up.

package shardstore

import (
	"context"
	"database/sql"
	"fmt"
	"sort"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// Leases is the set of shards a worker holds, each under the token it was acquired
// with. The zero value holds nothing. It is not safe for concurrent use: the relay
// loop owns it.
type Leases struct{ byShard map[int16]string }

// Token is the token the worker holds shard under ("" and false when it does not).
func (l *Leases) Token(shard int16) (string, bool) {
	tok, ok := l.byShard[shard]
	return tok, ok
}

// Len is how many shards the worker holds.
func (l *Leases) Len() int { return len(l.byShard) }

// Shards are the held shards in ascending order.
func (l *Leases) Shards() []int16 {
	out := make([]int16, 0, len(l.byShard))
	for s := range l.byShard {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Tokens are the distinct tokens the worker holds shards under (Read's argument).
func (l *Leases) Tokens() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range l.Shards() {
		if tok := l.byShard[s]; !seen[tok] {
			seen[tok] = true
			out = append(out, tok)
		}
	}
	return out
}

// List is the leases in shard order.
func (l *Leases) List() []Lease {
	out := make([]Lease, 0, len(l.byShard))
	for _, s := range l.Shards() {
		out = append(out, Lease{Shard: s, Token: l.byShard[s]})
	}
	return out
}

// Drop forgets shards (after an advance or settle said their leases are lost).
func (l *Leases) Drop(shards ...int16) {
	for _, s := range shards {
		delete(l.byShard, s)
	}
}

func (l *Leases) set(shard int16, token string) {
	if l.byShard == nil {
		l.byShard = map[int16]string{}
	}
	l.byShard[shard] = token
}

func (l *Leases) mine(token string) bool {
	for _, t := range l.byShard {
		if t == token {
			return true
		}
	}
	return false
}

// Rebalance is one lease round, run when the worker starts and then every lease/3,
// between batches: heartbeat, renew what l holds (dropping what was lost), read the
// shard rows, PlanLeases, release shards over the share, take missing ones under a
// fresh token. It returns the plan it applied.
func (s *Store) Rebalance(ctx context.Context, l *Leases) (LeasePlan, error) {
	if err := s.Heartbeat(ctx); err != nil {
		return LeasePlan{}, err
	}
	if err := s.Renew(ctx, l); err != nil {
		return LeasePlan{}, err
	}
	if err := s.SweepTokens(ctx); err != nil {
		return LeasePlan{}, err
	}
	rows, live, err := s.LeaseState(ctx)
	if err != nil {
		return LeasePlan{}, err
	}
	plan := PlanLeases(rows, l.mine, live)
	if len(plan.Release) > 0 {
		if _, err := s.Release(ctx, l, plan.Release); err != nil {
			return plan, err
		}
	}
	if plan.Take > 0 {
		if _, err := s.Acquire(ctx, l, plan.Take); err != nil {
			return plan, err
		}
	}
	return plan, nil
}

// AnnounceWanted asks the table's other workers for a lease round now
// (schema.LeasesWanted): for a worker that a round left under its share while others
// hold more (LeasePlan.Soon). They release their excess at window boundaries and
// announce that. The relay sends it only after a round of its own schedule, not after
// one another worker's announcement started: two workers under their share would
// otherwise wake each other in a loop while the one over it is stopped.
func (s *Store) AnnounceWanted(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, announceSQL, schema.Channel(s.t), schema.LeasesWanted); err != nil {
		return fmt.Errorf("announce wanted shards: %w", err)
	}
	return nil
}

// Heartbeat says this worker is live (database clock).
func (s *Store) Heartbeat(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, heartbeatSQL(s.t), s.workerID); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

func heartbeatSQL(t pgident.Table) string {
	return `INSERT INTO ` + side(t, schema.WorkersSuffix) + ` AS w (worker_id) VALUES ($1)
ON CONFLICT (worker_id) DO UPDATE SET heartbeat_at = now()`
}

// LeaseState reads every shard (the shard view: owner, its token's lease, whether
// the cursor is at a window boundary) and how many workers are live (heartbeat
// within a lease). It probes every shard's newest cursor row, so it is planned as the
// read is (inReadPlannerTx).
func (s *Store) LeaseState(ctx context.Context) ([]ShardLease, int, error) {
	var out []ShardLease
	live := 0
	err := s.inReadPlannerTx(ctx, "read the shard leases", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, leaseStateSQL(s.t), s.interval())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r ShardLease
			if err := rows.Scan(&live, &r.Shard, &r.Owner, &r.Expired, &r.AtBoundary); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, err
	}
	return out, live, nil
}

func leaseStateSQL(t pgident.Table) string {
	return `SELECT (SELECT count(*) FROM ` + side(t, schema.WorkersSuffix) + ` WHERE heartbeat_at > now() - $1::interval)::int,
       s.shard, COALESCE(s.owner, ''), COALESCE(s.lease_until < now(), true), s.pos IS NULL
FROM ` + side(t, schema.ShardSuffix) + ` s ORDER BY s.shard`
}

// Acquire takes up to n free or expired shards under one fresh token and adds them
// to l; it returns how many it took. Concurrent acquirers skip each other's rows.
func (s *Store) Acquire(ctx context.Context, l *Leases, n int) (int, error) {
	tok, err := s.newToken()
	if err != nil {
		return 0, err
	}
	rows, err := s.db.QueryContext(ctx, acquireSQL(s.t), tok, s.interval(), n)
	if err != nil {
		return 0, fmt.Errorf("acquire shards: %w", err)
	}
	defer rows.Close()
	took := 0
	for rows.Next() {
		var shard int16
		if err := rows.Scan(&shard); err != nil {
			return took, fmt.Errorf("acquire shards: %w", err)
		}
		l.set(shard, tok)
		took++
	}
	if err := rows.Err(); err != nil {
		return took, fmt.Errorf("acquire shards: %w", err)
	}
	return took, nil
}

// acquireSQL: $1 the fresh token, $2 the lease, $3 how many. A shard is free when it
// has no owner or its owner's token has no lease left (or no row). The cursor log
// stays: the new owner goes on where the last one advanced to. The token's row is
// written only when a shard was taken.
func acquireSQL(t pgident.Table) string {
	lease := side(t, schema.LeaseSuffix)
	return `WITH f AS (
    SELECT l.shard FROM ` + lease + ` l LEFT JOIN ` + side(t, schema.TokenSuffix) + ` k ON k.token = l.owner
    WHERE l.owner IS NULL OR k.lease_until IS NULL OR k.lease_until < now()
    ORDER BY l.shard LIMIT $3
    FOR UPDATE OF l SKIP LOCKED
), took AS (
    UPDATE ` + lease + ` l SET owner = $1 FROM f WHERE l.shard = f.shard
    RETURNING l.shard
), tok AS (
    INSERT INTO ` + side(t, schema.TokenSuffix) + ` (token, lease_until)
    SELECT $1, now() + $2::interval WHERE EXISTS (SELECT FROM took)
)
SELECT shard FROM took`
}

// Renew extends every lease l holds and drops from l the shards whose token no
// longer holds them (taken over after the lease ran out).
func (s *Store) Renew(ctx context.Context, l *Leases) error {
	if l.Len() == 0 {
		return nil
	}
	held := l.List()
	shards, tokens := leaseArrays(held)
	rows, err := s.db.QueryContext(ctx, renewSQL(s.t), pq.Array(shards), pq.Array(tokens), s.interval())
	if err != nil {
		return fmt.Errorf("renew shard leases: %w", err)
	}
	defer rows.Close()
	kept := map[int16]bool{}
	for rows.Next() {
		var shard int16
		if err := rows.Scan(&shard); err != nil {
			return fmt.Errorf("renew shard leases: %w", err)
		}
		kept[shard] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("renew shard leases: %w", err)
	}
	for _, h := range held {
		if !kept[h.Shard] {
			l.Drop(h.Shard)
		}
	}
	return nil
}

// renewSQL: $1 shards and $2 tokens (parallel), $3 the lease. It returns the shards
// still held under their token and extends those tokens' leases: one row per token.
// An upsert, so a token whose row a sweep deleted (it had expired and held nothing
// that round) counts again once it holds a shard.
func renewSQL(t pgident.Table) string {
	return `WITH kept AS (
    SELECT l.shard, l.owner FROM unnest($1::smallint[], $2::text[]) AS u(shard, token)
    JOIN ` + side(t, schema.LeaseSuffix) + ` l ON l.shard = u.shard AND l.owner = u.token
), tok AS (
    INSERT INTO ` + side(t, schema.TokenSuffix) + ` (token, lease_until)
    SELECT DISTINCT owner, now() + $3::interval FROM kept
    ON CONFLICT (token) DO UPDATE SET lease_until = EXCLUDED.lease_until
)
SELECT shard FROM kept`
}

// SweepTokens deletes the rows of tokens that hold no shard and whose leases ran
// out (a released or taken-over acquisition's): the token table keeps one row per
// live acquisition.
func (s *Store) SweepTokens(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, sweepTokensSQL(s.t)); err != nil {
		return fmt.Errorf("sweep lease tokens: %w", err)
	}
	return nil
}

func sweepTokensSQL(t pgident.Table) string {
	return `DELETE FROM ` + side(t, schema.TokenSuffix) + ` k
WHERE k.lease_until < now() AND NOT EXISTS (SELECT FROM ` + side(t, schema.LeaseSuffix) + ` l WHERE l.owner = k.token)`
}

// Release gives up shards (of l) that are at a window boundary and removes them from
// l; it returns the shards released. A shard whose window is being read in parts
// stays (a later round releases it).
func (s *Store) Release(ctx context.Context, l *Leases, shards []int16) ([]int16, error) {
	var give []Lease
	for _, sh := range shards {
		if tok, ok := l.Token(sh); ok {
			give = append(give, Lease{Shard: sh, Token: tok})
		}
	}
	return s.release(ctx, l, give, releaseSQL(s.t))
}

func releaseSQL(t pgident.Table) string {
	return `UPDATE ` + side(t, schema.LeaseSuffix) + ` l SET owner = NULL
FROM unnest($1::smallint[], $2::text[]) AS u(shard, token)
WHERE l.shard = u.shard AND l.owner = u.token
  AND ` + schema.NewestCursor(t, "l.shard", "c.pos") + ` IS NULL
RETURNING l.shard`
}

// ReleaseAll gives up every shard of l, mid-window or not (the cursor keeps pos and
// hi_tick, so the next owner goes on from there), and deletes the worker's heartbeat
// row: a clean shutdown, after the last advance. Its shards are free at once instead
// of after a lease.
func (s *Store) ReleaseAll(ctx context.Context, l *Leases) error {
	if _, err := s.release(ctx, l, l.List(), releaseAllSQL(s.t)); err != nil {
		return err
	}
	l.byShard = nil // what was not released was lost already
	if _, err := s.db.ExecContext(ctx, leaveSQL(s.t), s.workerID); err != nil {
		return fmt.Errorf("remove the worker's heartbeat: %w", err)
	}
	return nil
}

func releaseAllSQL(t pgident.Table) string {
	return `UPDATE ` + side(t, schema.LeaseSuffix) + ` l SET owner = NULL
FROM unnest($1::smallint[], $2::text[]) AS u(shard, token)
WHERE l.shard = u.shard AND l.owner = u.token
RETURNING l.shard`
}

func leaveSQL(t pgident.Table) string {
	return `DELETE FROM ` + side(t, schema.WorkersSuffix) + ` WHERE worker_id = $1`
}

func (s *Store) release(ctx context.Context, l *Leases, give []Lease, q string) ([]int16, error) {
	if len(give) == 0 {
		return nil, nil
	}
	shards, tokens := leaseArrays(give)
	rows, err := s.db.QueryContext(ctx, q, pq.Array(shards), pq.Array(tokens))
	if err != nil {
		return nil, fmt.Errorf("release shards: %w", err)
	}
	defer rows.Close()
	var out []int16
	for rows.Next() {
		var shard int16
		if err := rows.Scan(&shard); err != nil {
			return out, fmt.Errorf("release shards: %w", err)
		}
		out = append(out, shard)
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("release shards: %w", err)
	}
	l.Drop(out...)
	if len(out) > 0 {
		// The released shards have no owner until a worker's lease round takes them:
		// without this, the joining worker's next round (a poll interval later, or
		// lease/3) while their events waited (issue 21's second-long stalls).
		if _, err := s.db.ExecContext(ctx, announceSQL, schema.Channel(s.t), schema.LeasesReleased); err != nil {
			return out, fmt.Errorf("announce released shards: %w", err)
		}
	}
	return out, nil
}

// announceSQL wakes the table's other workers ($1 the channel, $2
// schema.LeasesReleased or schema.LeasesWanted) for a lease round. A statement of
// its own, after the round's statements committed: a listener acts on it at once,
// and the release (or the wanting worker's heartbeat) is visible then.
const announceSQL = `SELECT pg_notify($1, $2)`

// leaseArrays splits leases into the shard and token arrays the statements unnest.
func leaseArrays(ls []Lease) ([]int64, []string) {
	shards := make([]int64, len(ls))
	tokens := make([]string, len(ls))
	for i, x := range ls {
		shards[i], tokens[i] = int64(x.Shard), x.Token
	}
	return shards, tokens
}
