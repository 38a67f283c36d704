-- Settle: per row $1 event id, $2 token, $3 delete, $4 state, $5 count, $6 delay ms, $7 code, $8 message, $9 logged, $10 partition, $11 offset; $12 worker
WITH u AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::bool[], $4::text[], $5::bool[], $6::bigint[], $7::text[], $8::text[],
                         $9::bool[], $10::int[], $11::bigint[])
        AS u(event_id, token, del, state, counted, delay_ms, code, message, logged, kpart, koff)
), gone AS (
    DELETE FROM "public"."outbox_event_hold" h USING u, "public"."outbox_event_lease" s
    WHERE h.event_id = u.event_id AND u.del AND s.shard = h.shard AND s.owner = u.token
    RETURNING h.seq, u.logged, u.kpart, u.koff
), log AS (
    INSERT INTO "public"."outbox_event_batch" (owner, shards, last_seq, hi_tick, partitions, offsets, seqs)
    SELECT $12, '{}', '{}', '{}', array_agg(kpart ORDER BY seq), array_agg(koff ORDER BY seq), array_agg(seq ORDER BY seq)
    FROM gone WHERE logged HAVING count(*) > 0
    RETURNING 1
), kept AS (
    UPDATE "public"."outbox_event_hold" h
    SET state = u.state,
        attempts = h.attempts + CASE WHEN u.counted THEN 1 ELSE 0 END,
        next_attempt_at = now() + u.delay_ms * interval '1 millisecond',
        last_error_code = NULLIF(u.code, ''), last_error_message = NULLIF(u.message, ''),
        updated_at = now()
    FROM u, "public"."outbox_event_lease" s
    WHERE h.event_id = u.event_id AND NOT u.del AND s.shard = h.shard AND s.owner = u.token
    RETURNING 1
)
SELECT ((SELECT count(*) FROM gone) + (SELECT count(*) FROM kept))::int
