-- Advance: $1 worker; windows $3-$7, $2 (lo ticks) and $17 (hi ticks' stamps); published $8-$9 and $16 (seqs); hold rows $10-$15
WITH u AS (
    SELECT * FROM unnest($3::smallint[], $4::text[], $5::bigint[], $2::bigint[], $6::bigint[], $7::bool[], $17::bigint[])
        AS u(shard, token, last_seq, lo_tick, hi_tick, done, hi_stamp)
), ok AS (
    SELECT u.* FROM u JOIN "public"."outbox_event_tick" k ON k.tick = u.hi_tick AND (extract(epoch FROM k.at) * 1000000)::bigint = u.hi_stamp
), fenced AS (
    SELECT u.* FROM "public"."outbox_event_lease" l JOIN ok u ON l.shard = u.shard AND l.owner = u.token
    ORDER BY l.shard
    FOR NO KEY UPDATE OF l
), adv AS (
    INSERT INTO "public"."outbox_event_cursor" (shard, lo_tick, hi_tick, pos)
    SELECT shard, CASE WHEN done THEN hi_tick ELSE lo_tick END, CASE WHEN done THEN NULL ELSE hi_tick END,
           CASE WHEN done THEN NULL ELSE last_seq END
    FROM fenced ORDER BY shard
    RETURNING shard
), held AS (
    INSERT INTO "public"."outbox_event_hold" (event_id, aggregate_type, aggregate_id, aggregate_version, event_type,
        event_version, destination, message_key, payload, headers, created_at, txid, seq, shard,
        state, attempts, next_attempt_at, last_error_code, last_error_message)
    SELECT o.event_id, o.aggregate_type, o.aggregate_id, o.aggregate_version, o.event_type,
           o.event_version, o.destination, o.message_key, o.payload, o.headers, o.created_at, o.txid, o.seq, o.shard,
           x.state, x.attempts, now() + x.delay_ms * interval '1 millisecond', NULLIF(x.code, ''), NULLIF(x.message, '')
    FROM unnest($10::text[], $11::text[], $12::int[], $13::bigint[], $14::text[], $15::text[])
         AS x(event_id, state, attempts, delay_ms, code, message)
    JOIN "public"."outbox_event" o ON o.event_id = x.event_id
    WHERE o.shard IN (SELECT shard FROM fenced)
    ON CONFLICT (event_id) DO NOTHING
    RETURNING 1
), log AS (
    INSERT INTO "public"."outbox_event_batch" (owner, shards, last_seq, hi_tick, partitions, offsets, seqs)
    SELECT $1, array_agg(shard), array_agg(last_seq), array_agg(hi_tick), $8::int[], $9::bigint[], $16::bigint[]
    FROM fenced HAVING count(*) > 0
    RETURNING batch
)
SELECT COALESCE((SELECT array_agg(shard ORDER BY shard) FROM adv), '{}'),
       COALESCE((SELECT array_agg(shard ORDER BY shard) FROM u WHERE shard NOT IN (SELECT shard FROM ok)), '{}'),
       (SELECT count(*) FROM held), COALESCE((SELECT batch FROM log), 0)
