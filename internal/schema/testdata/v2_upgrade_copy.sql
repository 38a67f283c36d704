-- copyChunkSQL: $1 how many v1 rows to scan; 32 shards
WITH scan AS (
    SELECT v.* FROM "public"."outbox_event_v1" v WHERE v.event_id > (SELECT last_event_id FROM "public"."outbox_event_upgrade") ORDER BY v.event_id LIMIT $1
),
ins AS (
    INSERT INTO "public"."outbox_event_hold" (event_id, aggregate_type, aggregate_id, aggregate_version,
        event_type, event_version, destination, message_key, payload, headers, created_at, txid, seq, shard,
        state, attempts, next_attempt_at, last_error_code, last_error_message)
    SELECT c.event_id, c.aggregate_type, c.aggregate_id, c.aggregate_version,
           c.event_type, c.event_version, c.destination, c.message_key, c.payload, c.headers, c.created_at,
           '0'::xid8, 0, (hashtextextended(c.aggregate_type || '/' || c.aggregate_id, 0) & 31)::smallint,
           CASE WHEN c.status = 'DEAD' THEN 'DEAD'
                WHEN EXISTS (SELECT FROM "public"."outbox_event_v1" p
                             WHERE p.aggregate_type = c.aggregate_type AND p.aggregate_id = c.aggregate_id
                               AND p.aggregate_version < c.aggregate_version AND p.status IN ('PENDING', 'SENDING', 'RETRY'))
                THEN 'HELD'
                ELSE 'RETRY' END,
           c.retry_count,
           CASE c.status WHEN 'RETRY' THEN c.next_retry_at
                         WHEN 'SENDING' THEN GREATEST(COALESCE(c.lease_until, now()), now())
                         ELSE now() END,
           c.last_error_code, c.last_error_message
    FROM scan c
    WHERE c.status IN ('PENDING', 'SENDING', 'RETRY', 'DEAD')
    ON CONFLICT (event_id) DO NOTHING
    RETURNING state
),
prog AS (
    UPDATE "public"."outbox_event_upgrade"
    SET last_event_id = COALESCE((SELECT max(event_id) FROM scan), last_event_id),
        copied = copied + (SELECT count(*) FROM ins),
        dead = dead + (SELECT count(*) FROM ins WHERE state = 'DEAD'),
        updated_at = now()
    RETURNING 1
)
SELECT (SELECT count(*) FROM scan), (SELECT count(*) FROM prog)
