// marks.go: the statements that record a batch's outcome (SENT, RETRY, DEAD) or hand
// it back (release), each fenced by the batch's owner token.

package store

import (
	"context"
	"fmt"
	"time"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/redact"
)

// Sent is one successful publish to record.
type Sent struct {
	EventID   string
	Partition int32 // -1 when unknown
	Offset    int64 // -1 when unknown
}

// Failure is one failed publish to record as RETRY (or DEAD when attempts are used
// up) or directly as DEAD.
type Failure struct {
	EventID string
	Code    string
	Message string
	Delay   time.Duration // RETRY only: backoff before the next attempt
	// Uncounted: RETRY without using up an attempt (waiting for a missing topic is
	// bounded by its grace period, not by --max-attempts).
	Uncounted bool
}

// MaxErrorMessage bounds last_error_message so a huge broker error does not bloat rows.
const MaxErrorMessage = 1000

func markSentSQL(t pgident.Table) string {
	q := t.Qualified()
	return `UPDATE ` + q + ` t
SET status = 'SENT', sent_at = now(), updated_at = now(), lease_until = NULL,
    broker_partition = NULLIF(u.p, -1), broker_offset = NULLIF(u.o, -1),
    last_error_code = NULL, last_error_message = NULL
FROM unnest($2::text[], $3::int[], $4::bigint[]) AS u(id, p, o)
WHERE t.event_id = u.id AND t.owner_token = $1 AND t.status = 'SENDING'`
}

// MarkSent records successful publishes, fenced by owner token: rows taken over by
// another worker are left alone. It returns how many rows changed.
func (s *Store) MarkSent(ctx context.Context, token string, sent []Sent) (int64, error) {
	if len(sent) == 0 {
		return 0, nil
	}
	ids := make([]string, len(sent))
	parts := make([]int64, len(sent))
	offs := make([]int64, len(sent))
	for i, x := range sent {
		ids[i], parts[i], offs[i] = x.EventID, int64(x.Partition), x.Offset
	}
	s.Statements.Add(1)
	res, err := s.sent.ExecContext(ctx, token, pq.Array(ids), pq.Array(parts), pq.Array(offs))
	if err != nil {
		return 0, fmt.Errorf("mark sent: %w", err)
	}
	return res.RowsAffected()
}

// CodeMaxAttempts is stored when a row runs out of attempts; the last real error code
// is kept at the start of last_error_message.
const CodeMaxAttempts = "MAX_ATTEMPTS"

func markRetrySQL(t pgident.Table) string {
	q := t.Qualified()
	return `UPDATE ` + q + ` t
SET status = CASE WHEN NOT u.uncounted AND t.retry_count + 1 >= $2 THEN 'DEAD' ELSE 'RETRY' END,
    retry_count = t.retry_count + CASE WHEN u.uncounted THEN 0 ELSE 1 END,
    next_retry_at = now() + u.delay_ms * interval '1 millisecond',
    last_error_code = CASE WHEN NOT u.uncounted AND t.retry_count + 1 >= $2 THEN '` + CodeMaxAttempts + `' ELSE u.code END,
    last_error_message = CASE WHEN NOT u.uncounted AND t.retry_count + 1 >= $2 THEN u.code || ': ' || u.msg ELSE u.msg END,
    lease_until = NULL, updated_at = now()
FROM unnest($3::text[], $4::text[], $5::text[], $6::bigint[], $7::bool[]) AS u(id, code, msg, delay_ms, uncounted)
WHERE t.event_id = u.id AND t.owner_token = $1 AND t.status = 'SENDING'
RETURNING t.event_id, t.status`
}

// MarkRetry records failed attempts (fenced by owner token). A row whose attempts are
// used up (retry_count reaches maxAttempts) goes DEAD with code MAX_ATTEMPTS; an
// Uncounted failure never does and leaves retry_count alone. It
// returns the ids that went DEAD and the number of rows changed.
func (s *Store) MarkRetry(ctx context.Context, token string, maxAttempts int, fs []Failure) (dead []string, n int64, err error) {
	if len(fs) == 0 {
		return nil, 0, nil
	}
	ids, codes, msgs := split(fs)
	delays := make([]int64, len(fs))
	uncounted := make([]bool, len(fs))
	for i, f := range fs {
		delays[i] = f.Delay.Milliseconds()
		uncounted[i] = f.Uncounted
	}
	s.Statements.Add(1)
	rows, err := s.retry.QueryContext(ctx, token, maxAttempts, pq.Array(ids), pq.Array(codes), pq.Array(msgs), pq.Array(delays), pq.Array(uncounted))
	if err != nil {
		return nil, 0, fmt.Errorf("mark retry: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			return nil, 0, fmt.Errorf("mark retry: %w", err)
		}
		n++
		if st == "DEAD" {
			dead = append(dead, id)
		}
	}
	return dead, n, rows.Err()
}

func markDeadSQL(t pgident.Table) string {
	q := t.Qualified()
	return `UPDATE ` + q + ` t
SET status = 'DEAD', last_error_code = u.code, last_error_message = u.msg,
    retry_count = t.retry_count + 1, lease_until = NULL, updated_at = now()
FROM unnest($2::text[], $3::text[], $4::text[]) AS u(id, code, msg)
WHERE t.event_id = u.id AND t.owner_token = $1 AND t.status = 'SENDING'`
}

// MarkDead records permanent failures (fenced by owner token).
func (s *Store) MarkDead(ctx context.Context, token string, fs []Failure) (int64, error) {
	if len(fs) == 0 {
		return 0, nil
	}
	ids, codes, msgs := split(fs)
	s.Statements.Add(1)
	res, err := s.dead.ExecContext(ctx, token, pq.Array(ids), pq.Array(codes), pq.Array(msgs))
	if err != nil {
		return 0, fmt.Errorf("mark dead: %w", err)
	}
	return res.RowsAffected()
}

func releaseSQL(t pgident.Table) string {
	q := t.Qualified()
	return `UPDATE ` + q + ` t
SET status = CASE WHEN t.retry_count = 0 THEN 'PENDING' ELSE 'RETRY' END,
    owner_token = NULL, lease_until = NULL, next_retry_at = now(), updated_at = now()
WHERE t.event_id = ANY($2::text[]) AND t.owner_token = $1 AND t.status = 'SENDING'`
}

// Release hands unpublished claimed rows back (graceful shutdown, lease guard) so
// another worker can take them at once instead of waiting for the lease to expire.
func (s *Store) Release(ctx context.Context, token string, ids []string) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	s.Statements.Add(1)
	res, err := s.release.ExecContext(ctx, token, pq.Array(ids))
	if err != nil {
		return 0, fmt.Errorf("release leases: %w", err)
	}
	return res.RowsAffected()
}

func split(fs []Failure) (ids, codes, msgs []string) {
	ids = make([]string, len(fs))
	codes = make([]string, len(fs))
	msgs = make([]string, len(fs))
	for i, f := range fs {
		ids[i], codes[i] = f.EventID, f.Code
		msgs[i] = redact.Truncate(f.Message, MaxErrorMessage)
	}
	return
}
