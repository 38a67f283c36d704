package outboxstats

// Fail-fast for a database that hangs. Reads are bounded by Timeout, but a server
// that does not answer at all (a frozen host, stalled storage) is worse than slow:
// lib/pq waits for the server's answer to its cancel, so such a read would hold its
// reconcile worker until TCP gives up (abandonAfter bounds it instead), and every
// pipeline on the database would cost a worker a full Timeout per pass, one after
// another. So when a read times out, the pool pings the database (probeTimeout); when
// the ping times out too, the database is unresponsive, and for failFastFor every read
// of it fails at once with ErrDatabaseUnresponsive. A read that timed out while the
// database still answers the ping (a lock on one table, a slow query) marks nothing:
// the other pipelines on the database are fine. The first read after failFastFor
// tries again.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgerr"
)

// DefaultFailFastFor is how long the reads of an unresponsive database fail at once.
const DefaultFailFastFor = 10 * time.Second

// probeTimeout bounds the ping that tells a hung database from a slow read.
const probeTimeout = time.Second

// answerGrace is how long after its own Timeout a read may take to come back: the
// server's answer to the cancel lib/pq sends when the read's context ends.
const answerGrace = time.Second

// ErrDatabaseUnresponsive is returned (wrapped) by Read while the database is taken
// for unresponsive: a read timed out and a ping did not answer either.
var ErrDatabaseUnresponsive = errors.New("database unresponsive")

// Read runs read on the pool of dsn's database for key, in one of its read slots
// (takeSlot), unless the database is unresponsive. A read that timed out, while ctx
// itself is live, has the database pinged; an unanswered ping makes every read of it
// fail at once for failFastFor, this one included.
func (p *Pools) Read(ctx context.Context, key, dsn string, read func(*sql.DB) error) error {
	sdb, err := p.get(key, dsn)
	if err != nil {
		return err
	}
	if err := sdb.unresponsiveErr(time.Now(), p.failFastFor); err != nil {
		return err
	}
	release, err := p.takeSlot(ctx, sdb)
	if err != nil {
		return err
	}
	defer release()
	// Reads queued behind the one that found the database hung need not wait too.
	if err := sdb.unresponsiveErr(time.Now(), p.failFastFor); err != nil {
		return err
	}
	err = abandonAfter(ctx, Timeout+answerGrace, func() error { return read(sdb.db) })
	if err == nil || ctx.Err() != nil || !isTimeout(err) {
		return err
	}
	if probeErr := abandonAfter(ctx, probeTimeout, func() error { return sdb.db.PingContext(ctx) }); probeErr != nil {
		sdb.markUnresponsive(time.Now().Add(p.failFastFor))
		return unresponsive(p.failFastFor)
	}
	return err
}

// abandonAfter runs f and waits for it at most d (or until ctx ends). lib/pq answers a
// context's end by asking the server to cancel the statement, and then waits for the
// server's reply: a server that does not answer at all holds the statement, and the
// caller, until TCP gives up, hours later. So f runs on its own goroutine, and a
// caller still waiting after d gets context.DeadlineExceeded and leaves f behind.
// f's connection stays taken until the server answers (database/sql hands no other
// caller a connection in use), so abandoned calls are bounded by the pool's size, and
// f's results must not be read after an abandon.
func abandonAfter(ctx context.Context, d time.Duration, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("the database did not answer within %s: %w", d, context.DeadlineExceeded)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// isTimeout: the client's deadline, or the server's statement_timeout.
func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || pgerr.Is(err, "57014")
}

func (s *sharedDB) markUnresponsive(until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unresponsiveUntil = until
}

// unresponsiveErr is unresponsive(failFastFor) while the mark holds, else nil.
func (s *sharedDB) unresponsiveErr(now time.Time, failFastFor time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Before(s.unresponsiveUntil) {
		return unresponsive(failFastFor)
	}
	return nil
}

// unresponsive is the one text of ErrDatabaseUnresponsive, for the read that found the
// database hung and for those failed at once after it, so the status it goes into does
// not change from pass to pass.
func unresponsive(failFastFor time.Duration) error {
	return fmt.Errorf("%w: a read did not finish within %s and a ping not within %s; its reads fail at once for %s after that",
		ErrDatabaseUnresponsive, Timeout, probeTimeout, failFastFor)
}
