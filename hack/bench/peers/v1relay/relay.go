// relay.go: the claim -> write -> mark loop and its three statements.

package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/lib/pq"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// claimSQL takes up to $2 PENDING rows in insert order from the dispatch index,
// skipping rows other workers hold, under owner token $1 for lease $3.
const claimSQL = `UPDATE public.outbox_event t
SET status = 'SENDING', owner_token = $1, lease_until = now() + $3::interval,
    next_retry_at = now() + $3::interval, updated_at = now()
WHERE t.event_id IN (
    SELECT event_id FROM public.outbox_event
    WHERE status = 'PENDING' AND next_retry_at <= now()
    ORDER BY next_retry_at, created_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED)
RETURNING t.event_id, t.aggregate_type, t.aggregate_id, t.aggregate_version, t.event_type,
    t.event_version, t.destination, t.message_key, t.payload, t.headers, t.created_at`

// markSentSQL is fenced by the batch's owner token: rows another worker took over
// after a lease expired are left alone.
const markSentSQL = `UPDATE public.outbox_event SET status = 'SENT', sent_at = now(), updated_at = now(), lease_until = NULL
WHERE event_id = ANY ($2::text[]) AND owner_token = $1 AND status = 'SENDING'`

// releaseSQL hands failed rows back (fenced), due again in a second.
const releaseSQL = `UPDATE public.outbox_event SET status = 'PENDING', owner_token = NULL, lease_until = NULL,
    next_retry_at = now() + interval '1 second', updated_at = now()
WHERE event_id = ANY ($2::text[]) AND owner_token = $1 AND status = 'SENDING'`

// expiredSQL hands back rows whose lease ran out (their worker died), once a lease.
const expiredSQL = `UPDATE public.outbox_event SET status = 'PENDING', owner_token = NULL, lease_until = NULL, updated_at = now()
WHERE status = 'SENDING' AND lease_until < now()`

type relay struct {
	c  config
	db *sql.DB
	w  *kafka.Writer
}

func newRelay(c config, brokers []string) (*relay, error) {
	db, err := sql.Open("postgres", c.dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	w := &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Balancer:     &kafka.Murmur2Balancer{}, // key partitioning as the Java client does
		RequiredAcks: kafka.RequireAll,
		BatchSize:    c.batch,
		BatchTimeout: c.flush,
	}
	return &relay{c: c, db: db, w: w}, nil
}

func (r *relay) close() {
	_ = r.w.Close()
	_ = r.db.Close()
}

// run claims, writes and marks until ctx ends.
func (r *relay) run(ctx context.Context) error {
	lease := strconv.FormatInt(r.c.lease.Milliseconds(), 10) + " milliseconds"
	lastSweep := time.Time{}
	for i := 0; ctx.Err() == nil; i++ {
		if time.Since(lastSweep) > r.c.lease {
			if _, err := r.db.Exec(expiredSQL); err != nil {
				return fmt.Errorf("hand back expired leases: %w", err)
			}
			lastSweep = time.Now()
		}
		token := r.c.workerID + "/" + strconv.Itoa(i)
		n, err := r.batch(token, lease)
		if err != nil {
			return err
		}
		if n == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(r.c.poll):
			}
		}
	}
	return nil
}

type row struct {
	id, aggType, aggID, evType, topic, key string
	version                                int64
	evVersion                              int
	payload, headers                       []byte
	created                                time.Time
}

// batch claims one batch, writes it and marks it; it returns the rows claimed.
func (r *relay) batch(token, lease string) (int, error) {
	rows, err := r.claim(token, lease)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	msgs := make([]kafka.Message, len(rows))
	for i := range rows {
		msgs[i] = message(&rows[i])
	}
	// Not context-bound: a SIGTERM lets the batch in flight finish and be marked.
	werr := r.w.WriteMessages(context.Background(), msgs...)
	sent, failed := outcome(rows, werr)
	if _, err := r.db.Exec(markSentSQL, token, pq.Array(sent)); err != nil {
		return 0, fmt.Errorf("mark sent: %w", err)
	}
	if len(failed) > 0 {
		if _, err := r.db.Exec(releaseSQL, token, pq.Array(failed)); err != nil {
			return 0, fmt.Errorf("release: %w", err)
		}
	}
	return len(rows), nil
}

// claim runs the claim and returns the rows in insert order, versions of one
// aggregate in version order (what ORDER BY created_at, aggregate_version gives).
func (r *relay) claim(token, lease string) ([]row, error) {
	q, err := r.db.Query(claimSQL, token, r.c.batch, lease)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	defer q.Close()
	var rows []row
	for q.Next() {
		var x row
		if err := q.Scan(&x.id, &x.aggType, &x.aggID, &x.version, &x.evType, &x.evVersion, &x.topic, &x.key,
			&x.payload, &x.headers, &x.created); err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		rows = append(rows, x)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if !rows[i].created.Equal(rows[j].created) {
			return rows[i].created.Before(rows[j].created)
		}
		return rows[i].version < rows[j].version
	})
	return rows, q.Err()
}

// message carries the product's contract headers, so the consumer reads both alike.
func message(x *row) kafka.Message {
	h := []kafka.Header{
		{Key: schema.HeaderEventID, Value: []byte(x.id)},
		{Key: schema.HeaderEventType, Value: []byte(x.evType)},
		{Key: schema.HeaderEventVersion, Value: []byte(strconv.Itoa(x.evVersion))},
		{Key: schema.HeaderAggregateType, Value: []byte(x.aggType)},
		{Key: schema.HeaderAggregateID, Value: []byte(x.aggID)},
		{Key: schema.HeaderAggregateVersion, Value: []byte(strconv.FormatInt(x.version, 10))},
	}
	var extra map[string]string
	if len(x.headers) > 0 && json.Unmarshal(x.headers, &extra) == nil {
		keys := make([]string, 0, len(extra))
		for k := range extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			h = append(h, kafka.Header{Key: k, Value: []byte(extra[k])})
		}
	}
	return kafka.Message{Topic: x.topic, Key: []byte(x.key), Value: x.payload, Headers: h}
}

// outcome splits the batch by kafka-go's per-message errors (nil: all sent).
func outcome(rows []row, err error) (sent, failed []string) {
	var we kafka.WriteErrors
	isWE := errors.As(err, &we) && len(we) == len(rows)
	for i, x := range rows {
		if err == nil || isWE && we[i] == nil {
			sent = append(sent, x.id)
		} else {
			failed = append(failed, x.id) // this message, or the write as a whole
		}
	}
	return sent, failed
}
