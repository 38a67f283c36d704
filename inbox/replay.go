package inbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
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

// minReplayRate bounds how slow a replay may be (one message per 10 s at least).
const minReplayRate = 0.1

// maxReplayKey bounds ReplayOptions.Key.
const maxReplayKey = 200

// ReplayOptions say who replays and how fast.
type ReplayOptions struct {
	// RequestedBy and Reason are recorded in ReplayTable; both are required.
	RequestedBy, Reason string
	// Rate bounds the messages handled per second (default 50): a replay competes
	// with live traffic for the consumer database and downstream systems.
	Rate float64
	// Limit bounds the messages of one replay (default 1000).
	Limit int
	// Key, if set, makes RequestReplay idempotent: a second request of the group with
	// the same key returns the first instead of asking again (a retried Job), and
	// FindReplay finds it. At most 200 bytes.
	Key string
}

// ReplayResult counts what a replay did; it is also the row in ReplayTable.
type ReplayResult struct {
	ReplayID   int64
	Selected   int
	Applied    int // Applied or Gap
	Duplicates int // the event already had its effect (Duplicate or Stale)
	Failed     int // the handler failed again: still parked, attempts and error updated
}

func (o *ReplayOptions) check(sel ReplaySelector) error {
	if o.RequestedBy == "" || o.Reason == "" {
		return errors.New("inbox: a replay needs RequestedBy and Reason (they are recorded)")
	}
	if len(o.Key) > maxReplayKey {
		return fmt.Errorf("inbox: replay key is %d bytes, at most %d", len(o.Key), maxReplayKey)
	}
	if sel.empty() {
		return errors.New("inbox: a replay needs a selector (event ids, event type, error code or a time range)")
	}
	switch {
	case o.Rate == 0:
		o.Rate = 50
	case o.Rate < minReplayRate:
		return fmt.Errorf("inbox: replay rate %g/s is below %g/s (a replay this slow would look abandoned)", o.Rate, minReplayRate)
	}
	if o.Limit <= 0 {
		o.Limit = 1000
	}
	return nil
}

// Replay handles parked messages again with their original event ids, in their
// original order (topic, partition, offset), each in one transaction that also marks
// its parked row REPLAYED: the effect and the resolution commit together or not at
// all. The dedup row still guards: a message that already had its effect is a
// duplicate and is only marked. A message that fails again stays parked with its
// attempts and error updated. Every replay is recorded in ReplayTable.
//
// Replay runs in the caller; RequestReplay asks a running Consumer to do it. A replay
// stopped by ctx is handed back (REQUESTED): a running consumer of the group finishes
// it.
func (c *Consumer) Replay(ctx context.Context, sel ReplaySelector, o ReplayOptions) (ReplayResult, error) {
	if err := o.check(sel); err != nil {
		return ReplayResult{}, err
	}
	req, err := c.s.requestReplay(ctx, sel, o, ReplayRunning)
	if err != nil {
		return ReplayResult{}, err
	}
	return c.runReplay(ctx, req.ID, o.Rate)
}

// runReplay replays the parked rows tagged with replay id, records progress after
// each and the end (DONE, or FAILED with the error). It heartbeats while it runs, and
// waits out passing faults of the consumer database (MaxStoreWait) at every step.
func (c *Consumer) runReplay(ctx context.Context, id int64, rate float64) (ReplayResult, error) {
	stop := c.heartbeat(ctx, id)
	defer stop()
	res := ReplayResult{ReplayID: id}
	if st, err := c.s.replayStatus(ctx, id); err == nil { // a replay handed back goes on counting
		res.Applied, res.Duplicates, res.Failed = st.Applied, st.Duplicates, st.Failed
	}
	var rows []storedMessage
	if err := c.waitStore(ctx, id, "", "select", func() (err error) { rows, err = c.s.selectParked(ctx, id); return err }); err != nil {
		return res, c.endOrHandBack(ctx, res, err)
	}
	res.Selected = len(rows)
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	failed := map[aggKey]bool{} // aggregates whose earlier message failed again in this replay
	for i, p := range rows {
		if i > 0 {
			select {
			case <-ctx.Done():
				return res, c.s.handBackReplay(ctx, res)
			case <-tick.C:
			}
		}
		if err := c.replayOne(ctx, id, p, &res, failed); err != nil {
			return res, c.endOrHandBack(ctx, res, err)
		}
		if err := c.waitStore(ctx, id, p.km.Topic, "progress", func() error { return c.s.replayProgress(ctx, res) }); err != nil {
			return res, c.endOrHandBack(ctx, res, err)
		}
	}
	if c.o.HoldAggregateOnPark {
		if err := c.waitStore(ctx, id, "", "reread parked aggregates", func() error { return c.loadHeld(ctx) }); err != nil {
			return res, c.endOrHandBack(ctx, res, err)
		}
	}
	return res, c.s.endReplay(ctx, res, nil)
}

// endOrHandBack hands a replay stopped by ctx back, and ends any other as FAILED.
func (c *Consumer) endOrHandBack(ctx context.Context, res ReplayResult, err error) error {
	if ctx.Err() != nil {
		return c.s.handBackReplay(ctx, res)
	}
	return c.s.endReplay(ctx, res, err)
}

// replayOne handles one parked message; only a consumer database fault that
// outlasted MaxStoreWait is an error. With HoldAggregateOnPark, a message whose
// aggregate had an earlier message fail again in this replay is not handled: it stays
// parked behind it, as when consumed.
func (c *Consumer) replayOne(ctx context.Context, id int64, p storedMessage, res *ReplayResult, failed map[aggKey]bool) error {
	m, err := FromKafka(p.km)
	k := aggKey{m.AggregateType, m.AggregateID}
	if err == nil && c.o.HoldAggregateOnPark && m.AggregateID != "" && failed[k] {
		err = fmt.Errorf("%w: an earlier version of %s/%s is still parked", errPredecessorParked, m.AggregateType, m.AggregateID)
	} else if err == nil {
		var o Outcome
		err = c.waitStore(ctx, id, p.km.Topic, "handle", func() (err error) {
			o, err = c.s.handleThen(ctx, m, c.fn, c.o.WaitForGaps, func(tx *sql.Tx) error { return c.s.markReplayed(ctx, tx, p.km) })
			return err
		})
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
	if storeFault(err) || ctx.Err() != nil {
		return err
	}
	res.Failed++
	failed[k] = true
	c.o.Log.Info("replayed message failed again; it stays parked", "consumerGroup", c.s.group, "eventId", m.EventID,
		"source", source(err), "error", err.Error())
	row := parkedRow{km: p.km, m: m, code: parkCode(err), err: err, attempts: 1}
	return c.waitStore(ctx, id, p.km.Topic, "park", func() error {
		_, perr := c.s.park(ctx, row)
		return perr
	})
}

// storedMessage is a parked row as the Kafka message it was.
type storedMessage struct{ km kafka.Message }

// selectParked returns the PARKED rows tagged with replay id, in their original order.
func (s *Store) selectParked(ctx context.Context, id int64) ([]storedMessage, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT topic, kafka_partition, kafka_offset, message_key, headers, payload
FROM `+s.parked+` WHERE consumer_group = $1 AND replay_id = $2 AND status = 'PARKED'
ORDER BY topic, kafka_partition, kafka_offset`, s.group, id)
	if err != nil {
		return nil, storeErr("select parked messages of replay %d: %w", id, err)
	}
	defer rows.Close()
	var out []storedMessage
	for rows.Next() {
		var km kafka.Message
		var hj []byte
		if err := rows.Scan(&km.Topic, &km.Partition, &km.Offset, &km.Key, &hj, &km.Value); err != nil {
			return nil, storeErr("read parked message: %w", err)
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
