-- DueHolds: $1 tokens, $2 how many
SELECT h.shard, s.owner, h.seq, h.event_id, h.aggregate_type, h.aggregate_id, h.aggregate_version,
       h.event_type, h.event_version, h.destination, h.message_key, h.payload, h.headers, h.created_at,
       h.state, h.attempts, h.next_attempt_at, h.last_error_code, h.last_error_message, h.held_at, h.updated_at
FROM "public"."outbox_event_lease" s
JOIN "public"."outbox_event_hold" h ON h.shard = s.shard AND h.state IN ('RETRY', 'HELD')
WHERE s.owner = ANY ($1::text[])
  AND CASE WHEN h.state = 'RETRY' THEN h.next_attempt_at <= now()
           ELSE NOT EXISTS (SELECT FROM "public"."outbox_event_hold" r
                            WHERE r.aggregate_type = h.aggregate_type AND r.aggregate_id = h.aggregate_id
                              AND r.aggregate_version < h.aggregate_version AND r.state = 'RETRY') END
ORDER BY h.aggregate_type, h.aggregate_id, h.aggregate_version
LIMIT $2
