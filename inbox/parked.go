package inbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/redact"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// ParkedTable holds the messages a consumer group could not handle: one row per Kafka
// message (consumer group, topic, partition, offset), with everything needed to
// handle it again later (key, headers, payload) and why it was parked. A parked
// message's offset is committed, so later messages flow; the row is its place.
const ParkedTable = schema.ParkedTable

// ReplayTable records every replay of parked messages: who, why, what was selected,
// how far it got and what came of it. A row is a request (REQUESTED) until a running
// Consumer of its group takes it (RUNNING, heartbeat_at moving) and ends it (DONE, or
// FAILED with error).
const ReplayTable = "message_consume_replay"

// Parked-row statuses.
const (
	ParkedOpen     = "PARKED"   // waiting for a fix and a replay
	ParkedReplayed = "REPLAYED" // handled again by Replay (applied, duplicate or stale)
)

// maxErrorMessage bounds parked.error_message; the full error is in the consumer log.
const maxErrorMessage = 1000

func parkedDDL(schemaQ string) []string {
	p := schemaQ + "." + pgident.Quote(ParkedTable)
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + p + ` (
    consumer_group    text        NOT NULL,
    topic             text        NOT NULL,
    kafka_partition   int         NOT NULL,
    kafka_offset      bigint      NOT NULL,
    event_id          text        NOT NULL DEFAULT '',
    event_type        text        NOT NULL DEFAULT '',
    aggregate_type    text        NOT NULL DEFAULT '',
    aggregate_id      text        NOT NULL DEFAULT '',
    aggregate_version bigint      NOT NULL DEFAULT 0,
    message_key       bytea       NULL,
    headers           jsonb       NOT NULL DEFAULT '{}',
    payload           bytea       NULL,
    error_code        text        NOT NULL,
    error_message     text        NOT NULL,
    attempts          int         NOT NULL,
    status            text        NOT NULL DEFAULT 'PARKED' CHECK (status IN ('PARKED', 'REPLAYED')),
    first_seen_at     timestamptz NOT NULL DEFAULT now(),
    last_seen_at      timestamptz NOT NULL DEFAULT now(),
    resolved_at       timestamptz NULL,
    replay_id         bigint      NULL,
    PRIMARY KEY (consumer_group, topic, kafka_partition, kafka_offset)
)`,
		`CREATE INDEX IF NOT EXISTS ` + pgident.Quote(ParkedTable+"_event_idx") + ` ON ` + p + ` (consumer_group, event_id)`,
		`CREATE INDEX IF NOT EXISTS ` + pgident.Quote(ParkedTable+"_open_idx") + ` ON ` + p +
			` (consumer_group, aggregate_type, aggregate_id) WHERE status = 'PARKED'`,
		`CREATE TABLE IF NOT EXISTS ` + schemaQ + `.` + pgident.Quote(ReplayTable) + ` (
    replay_id      bigserial   PRIMARY KEY,
    consumer_group text        NOT NULL,
    requested_by   text        NOT NULL,
    request_key    text        NULL,
    reason         text        NOT NULL,
    selector       jsonb       NOT NULL,
    status         text        NOT NULL CHECK (status IN ('REQUESTED', 'RUNNING', 'DONE', 'FAILED')),
    rate           float8      NOT NULL,
    requested_at   timestamptz NOT NULL DEFAULT now(),
    started_at     timestamptz NULL,
    heartbeat_at   timestamptz NULL,
    finished_at    timestamptz NULL,
    selected       int         NOT NULL DEFAULT 0,
    applied        int         NOT NULL DEFAULT 0,
    duplicates     int         NOT NULL DEFAULT 0,
    failed         int         NOT NULL DEFAULT 0,
    error          text        NULL
)`,
		`ALTER TABLE ` + schemaQ + `.` + pgident.Quote(ReplayTable) + ` ADD COLUMN IF NOT EXISTS request_key text NULL`,
		`CREATE UNIQUE INDEX IF NOT EXISTS ` + pgident.Quote(ReplayTable+"_key_idx") + ` ON ` + schemaQ + `.` + pgident.Quote(ReplayTable) +
			` (consumer_group, request_key) WHERE request_key IS NOT NULL`,
		`CREATE INDEX IF NOT EXISTS ` + pgident.Quote(ReplayTable+"_open_idx") + ` ON ` + schemaQ + `.` + pgident.Quote(ReplayTable) +
			` (consumer_group, replay_id) WHERE status IN ('REQUESTED', 'RUNNING')`,
	}
}

// parkedRow is one message on its way into the parking table.
type parkedRow struct {
	km       kafka.Message
	m        Message // zero when the message could not be read (invalid headers)
	code     string
	err      error
	attempts int
}

// park records p as parked in its own transaction and reports whether that made a
// new parked row. A redelivery of a parked message (same offset: the park committed,
// the offset commit did not; or the same event id at another offset: the relay or a
// producer sent it twice) refreshes the existing row (attempts add up, last_seen_at)
// instead of adding one, so one bad event is one row and one count. The caller
// commits the offset only after park returned nil.
func (s *Store) park(ctx context.Context, p parkedRow) (bool, error) {
	headers := map[string]string{}
	for _, h := range p.km.Headers {
		headers[pgText(h.Key)] = pgText(string(h.Value))
	}
	hj, err := json.Marshal(headers)
	if err != nil {
		return false, fmt.Errorf("inbox: encode headers of offset %d: %w", p.km.Offset, err)
	}
	var inserted bool
	err = s.db.QueryRowContext(ctx, parkSQL(s.parked),
		s.group, p.km.Topic, p.km.Partition, p.km.Offset, pgText(p.m.EventID), pgText(p.m.EventType), pgText(p.m.AggregateType),
		pgText(p.m.AggregateID), p.m.AggregateVersion, nullBytes(p.km.Key), hj, nullBytes(p.km.Value), p.code,
		pgText(redact.Truncate(p.err.Error(), maxErrorMessage)), p.attempts).Scan(&inserted)
	switch {
	case errors.Is(err, sql.ErrNoRows): // merged into the event's open row
		return false, nil
	case err != nil:
		return false, storeErr("park offset %s/%d/%d: %w", p.km.Topic, p.km.Partition, p.km.Offset, err)
	}
	return inserted, nil
}

// parkSQL merges into an open row of the same event id at another offset, or else
// inserts (refreshing a row at the same offset). It returns no row when it merged,
// and whether the row is new otherwise.
func parkSQL(parked string) string {
	return `WITH merged AS (
    UPDATE ` + parked + ` p SET error_code = $13, error_message = $14, attempts = p.attempts + $15, last_seen_at = now()
    WHERE p.consumer_group = $1 AND $5::text <> '' AND p.event_id = $5::text AND p.status = 'PARKED'
      AND (p.topic, p.kafka_partition, p.kafka_offset) <> ($2::text, $3::int, $4::bigint)
    RETURNING 1
)
INSERT INTO ` + parked + ` AS p
    (consumer_group, topic, kafka_partition, kafka_offset, event_id, event_type, aggregate_type, aggregate_id,
     aggregate_version, message_key, headers, payload, error_code, error_message, attempts)
SELECT $1, $2::text, $3::int, $4::bigint, $5::text, $6, $7, $8, $9::bigint, $10::bytea, $11::jsonb, $12::bytea, $13, $14, $15::int
WHERE NOT EXISTS (SELECT 1 FROM merged)
ON CONFLICT (consumer_group, topic, kafka_partition, kafka_offset) DO UPDATE
SET error_code = EXCLUDED.error_code, error_message = EXCLUDED.error_message,
    attempts = p.attempts + EXCLUDED.attempts, last_seen_at = now()
RETURNING (xmax = 0)`
}

// openAggregates lists the aggregates with a PARKED message in this consumer group:
// with Options.HoldAggregateOnPark their later versions are parked behind it.
func (s *Store) openAggregates(ctx context.Context) (map[aggKey]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT aggregate_type, aggregate_id FROM `+s.parked+
		` WHERE consumer_group = $1 AND status = 'PARKED' AND aggregate_id <> ''`, s.group)
	if err != nil {
		return nil, storeErr("read parked aggregates: %w", err)
	}
	defer rows.Close()
	held := map[aggKey]bool{}
	for rows.Next() {
		var k aggKey
		if err := rows.Scan(&k.typ, &k.id); err != nil {
			return nil, storeErr("read parked aggregates: %w", err)
		}
		held[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, storeErr("read parked aggregates: %w", err)
	}
	return held, nil
}

// ParkedCount returns how many messages of this consumer group are parked (status
// PARKED), for dashboards and tests.
func (s *Store) ParkedCount(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM `+s.parked+
		` WHERE consumer_group = $1 AND status = 'PARKED'`, s.group).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("inbox: count parked: %w", err)
	}
	return n, nil
}

func nullBytes(b []byte) any {
	if b == nil {
		return sql.Null[[]byte]{}
	}
	return b
}

// pgText makes s storable in a text or jsonb column: PostgreSQL refuses NUL bytes
// and invalid UTF-8, and a message that carries them must still be parked, not
// retried forever. The payload and key are bytea and kept as they are.
func pgText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}
