// gate_check.go: the spike's correctness check, run before it is measured. A
// transaction with a lower txid (and a lower seq, in the same shard) that commits
// after a higher one must be read in the window its commit falls in, not skipped; so
// must a row written in a subtransaction; a long transaction that writes nothing to
// the outbox holds nothing back. Batches of one row, so windows are read in parts.

package main

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
)

// gateCheck runs the scenario in a fresh database and returns what went wrong.
func (s *stack) gateCheck() error {
	ctx := context.Background()
	_, dsn, db, err := s.newDatabase("gate-check")
	if err != nil {
		return err
	}
	defer db.Close()
	if err := gateSetup(db); err != nil {
		return err
	}
	late, other, err := sameShardAggregates(db)
	if err != nil {
		return err
	}
	insert := func(q interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}, id, agg string) error {
		_, err := q.ExecContext(ctx, gateInsertSQL, id, "order", agg, 1, "order.changed", "chk", agg, `{"a":1}`, nil)
		return err
	}
	lateTx, err := db.BeginTx(ctx, nil) // lower txid, lower seq, commits last
	if err != nil {
		return err
	}
	defer lateTx.Rollback() //nolint:errcheck // committed below
	if err := insert(lateTx, "late", late); err != nil {
		return err
	}
	elsewhere, err := db.BeginTx(ctx, nil) // a long write transaction that writes no outbox row
	if err != nil {
		return err
	}
	defer elsewhere.Rollback() //nolint:errcheck // committed below
	if _, err := elsewhere.ExecContext(ctx, `SELECT pg_current_xact_id()`); err != nil {
		return err
	}
	sub, err := db.BeginTx(ctx, nil) // the outbox row written in a subtransaction
	if err != nil {
		return err
	}
	defer sub.Rollback() //nolint:errcheck // committed below
	if _, err := sub.ExecContext(ctx, `SAVEPOINT s`); err != nil {
		return err
	}
	if err := insert(sub, "sub", "chk-sub"); err != nil {
		return err
	}
	if _, err := sub.ExecContext(ctx, `RELEASE SAVEPOINT s`); err != nil {
		return err
	}
	if err := insert(db, "early", other); err != nil { // higher txid, commits first
		return err
	}
	if err := wantRead(ctx, dsn, db, "after the early commit", "early"); err != nil {
		return err
	}
	if err := lateTx.Commit(); err != nil {
		return err
	}
	if err := sub.Commit(); err != nil {
		return err
	}
	if err := wantRead(ctx, dsn, db, "after the late commits", "late", "sub"); err != nil {
		return err
	}
	if err := lowerThan(db, "late", "early"); err != nil {
		return err
	}
	for i := 0; i < 3; i++ {
		if err := insert(db, fmt.Sprintf("next-%d", i), fmt.Sprintf("%s-n%d", late, i)); err != nil {
			return err
		}
	}
	if err := wantRead(ctx, dsn, db, "with a long transaction open elsewhere", "next-0", "next-1", "next-2"); err != nil {
		return err
	}
	if err := elsewhere.Commit(); err != nil {
		return err
	}
	return wantRead(ctx, dsn, db, "after the long transaction", "")
}

// sameShardAggregates returns two aggregate ids of type order in one shard.
func sameShardAggregates(db *sql.DB) (string, string, error) {
	var other string
	err := db.QueryRow(`SELECT 'chk-' || g FROM generate_series(1, 10000) g
WHERE (hashtextextended('order/chk-' || g, 0) & 255) = (hashtextextended('order/chk-0', 0) & 255) LIMIT 1`).Scan(&other)
	return "chk-0", other, err
}

// wantRead ticks, drains with one reader in batches of one, and compares the event
// ids read with want ("" alone: nothing).
func wantRead(ctx context.Context, dsn string, db *sql.DB, when string, want ...string) error {
	if err := gateTick(ctx, db); err != nil {
		return err
	}
	got, err := gateDrainIDs(ctx, dsn, db)
	if err != nil {
		return fmt.Errorf("%s: %w", when, err)
	}
	if len(want) == 1 && want[0] == "" {
		want = nil
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		return fmt.Errorf("v2 correctness check %s: read [%s], want [%s]", when, strings.Join(got, ","), strings.Join(want, ","))
	}
	return nil
}

func gateDrainIDs(ctx context.Context, dsn string, db *sql.DB) ([]string, error) {
	toks, err := gateLease(ctx, db, 1)
	if err != nil {
		return nil, err
	}
	pool, err := sql.Open("postgres", dsn)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	var ids []string
	err = gateLoop(ctx, pool, toks[0], 1, func(r gateRow) { ids = append(ids, r.eventID) })
	return ids, err
}

// lowerThan checks the scenario is the intended one: a's txid and seq are lower than
// b's, and both are in one shard.
func lowerThan(db *sql.DB, a, b string) error {
	var ok bool
	err := db.QueryRow(`SELECT x.txid < y.txid AND x.seq < y.seq AND x.shard = y.shard
FROM outbox_v2 x, outbox_v2 y WHERE x.event_id = $1 AND y.event_id = $2`, a, b).Scan(&ok)
	if err == nil && !ok {
		err = fmt.Errorf("v2 correctness check: %s does not have a lower txid and seq than %s in the same shard", a, b)
	}
	return err
}
