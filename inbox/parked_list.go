package inbox

import (
	"context"
	"fmt"
	"time"
)

// ParkedMessage is one open parked row, without its payload (read the table for it).
type ParkedMessage struct {
	Topic                      string
	Partition                  int
	Offset                     int64
	EventID, EventType         string
	AggregateType, AggregateID string
	AggregateVersion           int64
	ErrorCode, ErrorMessage    string
	Attempts                   int
	FirstSeenAt, LastSeenAt    time.Time
}

// Parked lists up to limit open parked messages of the group, oldest first.
func (s *Store) Parked(ctx context.Context, limit int) ([]ParkedMessage, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT topic, kafka_partition, kafka_offset, event_id, event_type, aggregate_type,
    aggregate_id, aggregate_version, error_code, error_message, attempts, first_seen_at, last_seen_at
FROM `+s.parked+` WHERE consumer_group = $1 AND status = 'PARKED' ORDER BY first_seen_at, topic, kafka_partition, kafka_offset LIMIT $2`,
		s.group, limit)
	if err != nil {
		return nil, fmt.Errorf("inbox: list parked: %w", err)
	}
	defer rows.Close()
	var out []ParkedMessage
	for rows.Next() {
		var p ParkedMessage
		if err := rows.Scan(&p.Topic, &p.Partition, &p.Offset, &p.EventID, &p.EventType, &p.AggregateType, &p.AggregateID,
			&p.AggregateVersion, &p.ErrorCode, &p.ErrorMessage, &p.Attempts, &p.FirstSeenAt, &p.LastSeenAt); err != nil {
			return nil, fmt.Errorf("inbox: list parked: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
