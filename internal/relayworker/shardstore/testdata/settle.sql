-- Settle: per row $1 event id, $2 token, $3 delete, $4 state, $5 count, $6 delay ms, $7 code, $8 message
WITH u AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::bool[], $4::text[], $5::bool[], $6::bigint[], $7::text[], $8::text[])
        AS u(event_id, token, del, state, counted, delay_ms, code, message)
), gone AS (
    DELETE FROM "public"."outbox_event_hold" h USING u, "public"."outbox_event_shard" s
    WHERE h.event_id = u.event_id AND u.del AND s.shard = h.shard AND s.owner = u.token
    RETURNING 1
), kept AS (
    UPDATE "public"."outbox_event_hold" h
    SET state = u.state,
        attempts = h.attempts + CASE WHEN u.counted THEN 1 ELSE 0 END,
        next_attempt_at = now() + u.delay_ms * interval '1 millisecond',
        last_error_code = NULLIF(u.code, ''), last_error_message = NULLIF(u.message, ''),
        updated_at = now()
    FROM u, "public"."outbox_event_shard" s
    WHERE h.event_id = u.event_id AND NOT u.del AND s.shard = h.shard AND s.owner = u.token
    RETURNING 1
)
SELECT ((SELECT count(*) FROM gone) + (SELECT count(*) FROM kept))::int
