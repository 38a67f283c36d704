package inbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lib/pq"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/redact"
)

// ReplaySelector picks parked messages of the consumer group (status PARKED). Empty
// fields do not filter; at least one filter is required, so a replay never takes
// "everything" by accident.
type ReplaySelector struct {
	EventIDs  []string  `json:"eventIds,omitempty"`
	EventType string    `json:"eventType,omitempty"`
	ErrorCode string    `json:"errorCode,omitempty"`
	Since     time.Time `json:"since,omitzero"` // first parked at or after
	Until     time.Time `json:"until,omitzero"` // first parked before
}

func (s ReplaySelector) empty() bool {
	return len(s.EventIDs) == 0 && s.EventType == "" && s.ErrorCode == "" && s.Since.IsZero() && s.Until.IsZero()
}

// ReplayOptions say who replays and how fast.
type ReplayOptions struct {
	// RequestedBy and Reason are recorded in ReplayTable; both are required.
	RequestedBy, Reason string
	// Rate bounds the messages handled per second (default 50): a replay competes
	// with live traffic for the consumer database and downstream systems.
	Rate float64
	// Limit bounds the messages of one replay (default 1000).
	Limit int
}

// ReplayResult counts what a replay did; it is also the row in ReplayTable.
type ReplayResult struct {
	ReplayID   int64
	Selected   int
	Applied    int // Applied or Gap
	Duplicates int // the event already had its effect (Duplicate or Stale)
	Failed     int // the handler failed again: still parked, attempts and error updated
}

// Replay handles parked messages again with their original event ids, in their
// original order (topic, partition, offset), each in one transaction that also marks
// its parked row REPLAYED: the effect and the resolution commit together or not at
// all. The dedup row still guards: a message that already had its effect is a
// duplicate and is only marked. A message that fails again stays parked with its
// attempts and error updated. Every replay is recorded in ReplayTable.
func (c *Consumer) Replay(ctx context.Context, sel ReplaySelector, o ReplayOptions) (ReplayResult, error) {
	var res ReplayResult
	if o.RequestedBy == "" || o.Reason == "" {
		return res, errors.New("inbox: a replay needs RequestedBy and Reason (they are recorded)")
	}
	if sel.empty() {
		return res, errors.New("inbox: a replay needs a selector (event ids, event type, error code or a time range)")
	}
	if o.Rate <= 0 {
		o.Rate = 50
	}
	if o.Limit <= 0 {
		o.Limit = 1000
	}
	rows, err := c.s.selectParked(ctx, sel, o.Limit)
	if err != nil {
		return res, err
	}
	res.Selected = len(rows)
	if res.ReplayID, err = c.s.startReplay(ctx, sel, o); err != nil {
		return res, err
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / o.Rate))
	defer tick.Stop()
	for i, p := range rows {
		if i > 0 {
			select {
			case <-ctx.Done():
				return res, c.s.finishReplay(context.WithoutCancel(ctx), res, ctx.Err())
			case <-tick.C:
			}
		}
		if err := c.replayOne(ctx, p, &res); err != nil {
			return res, c.s.finishReplay(context.WithoutCancel(ctx), res, err)
		}
	}
	if c.o.HoldAggregateOnPark {
		if err := c.loadHeld(ctx); err != nil {
			return res, c.s.finishReplay(context.WithoutCancel(ctx), res, err)
		}
	}
	return res, c.s.finishReplay(ctx, res, nil)
}

// replayOne handles one parked message; only a consumer database fault is an error.
func (c *Consumer) replayOne(ctx context.Context, p storedMessage, res *ReplayResult) error {
	m, err := FromKafka(p.km)
	if err == nil {
		var o Outcome
		o, err = c.s.handleThen(ctx, m, c.fn, c.o.WaitForGaps, func(tx *sql.Tx) error { return c.s.markReplayed(ctx, tx, p.km) })
		switch o {
		case Applied, Gap:
			res.Applied++
		case Duplicate, Stale:
			res.Duplicates++
		}
		if o != 0 {
			c.o.Log.Info("parked message replayed", "consumerGroup", c.s.group, "eventId", m.EventID, "outcome", o.String())
			return nil
		}
	}
	var se *ErrStore
	if errors.As(err, &se) {
		return err
	}
	res.Failed++
	c.o.Log.Info("replayed message failed again; it stays parked", "consumerGroup", c.s.group, "eventId", m.EventID, "error", err.Error())
	return c.s.park(ctx, parkedRow{km: p.km, m: m, code: parkCode(err), err: err, attempts: 1})
}

// storedMessage is a parked row as the Kafka message it was.
type storedMessage struct{ km kafka.Message }

func (s *Store) selectParked(ctx context.Context, sel ReplaySelector, limit int) ([]storedMessage, error) {
	var since, until any
	if !sel.Since.IsZero() {
		since = sel.Since
	}
	if !sel.Until.IsZero() {
		until = sel.Until
	}
	rows, err := s.db.QueryContext(ctx, `SELECT topic, kafka_partition, kafka_offset, message_key, headers, payload
FROM `+s.parked+`
WHERE consumer_group = $1 AND status = 'PARKED'
  AND (COALESCE(cardinality($2::text[]), 0) = 0 OR event_id = ANY($2))
  AND ($3 = '' OR event_type = $3) AND ($4 = '' OR error_code = $4)
  AND ($5::timestamptz IS NULL OR first_seen_at >= $5) AND ($6::timestamptz IS NULL OR first_seen_at < $6)
ORDER BY topic, kafka_partition, kafka_offset LIMIT $7`,
		s.group, pq.Array(sel.EventIDs), sel.EventType, sel.ErrorCode, since, until, limit)
	if err != nil {
		return nil, fmt.Errorf("inbox: select parked messages: %w", err)
	}
	defer rows.Close()
	var out []storedMessage
	for rows.Next() {
		var km kafka.Message
		var hj []byte
		if err := rows.Scan(&km.Topic, &km.Partition, &km.Offset, &km.Key, &hj, &km.Value); err != nil {
			return nil, fmt.Errorf("inbox: read parked message: %w", err)
		}
		var hs map[string]string
		if err := json.Unmarshal(hj, &hs); err != nil {
			return nil, fmt.Errorf("inbox: headers of parked %s/%d/%d: %w", km.Topic, km.Partition, km.Offset, err)
		}
		for k, v := range hs {
			km.Headers = append(km.Headers, kafka.Header{Key: k, Value: []byte(v)})
		}
		out = append(out, storedMessage{km: km})
	}
	return out, rows.Err()
}

func (s *Store) markReplayed(ctx context.Context, tx *sql.Tx, km kafka.Message) error {
	_, err := tx.ExecContext(ctx, `UPDATE `+s.parked+` SET status = 'REPLAYED', resolved_at = now(), last_seen_at = now()
WHERE consumer_group = $1 AND topic = $2 AND kafka_partition = $3 AND kafka_offset = $4`, s.group, km.Topic, km.Partition, km.Offset)
	if err != nil {
		return storeErr("mark parked %s/%d/%d replayed: %w", km.Topic, km.Partition, km.Offset, err)
	}
	return nil
}

func (s *Store) startReplay(ctx context.Context, sel ReplaySelector, o ReplayOptions) (int64, error) {
	sj, err := json.Marshal(sel)
	if err != nil {
		return 0, fmt.Errorf("inbox: encode selector: %w", err)
	}
	var id int64
	err = s.db.QueryRowContext(ctx, `INSERT INTO `+s.replays+` (consumer_group, requested_by, reason, selector)
VALUES ($1, $2, $3, $4) RETURNING replay_id`, s.group, o.RequestedBy, redact.Truncate(o.Reason, maxErrorMessage), sj).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("inbox: record replay: %w", err)
	}
	return id, nil
}

// finishReplay records the counts and returns runErr (or the recording's error).
func (s *Store) finishReplay(ctx context.Context, r ReplayResult, runErr error) error {
	_, err := s.db.ExecContext(ctx, `UPDATE `+s.replays+`
SET finished_at = now(), selected = $2, applied = $3, duplicates = $4, failed = $5 WHERE replay_id = $1`,
		r.ReplayID, r.Selected, r.Applied, r.Duplicates, r.Failed)
	if runErr != nil {
		return runErr
	}
	if err != nil {
		return fmt.Errorf("inbox: record replay %d result: %w", r.ReplayID, err)
	}
	return nil
}
