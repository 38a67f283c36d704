-- movePassedBatch, archive mode: v2 outbox rows every cursor passed
WITH v AS (SELECT p.event_id
    FROM (SELECT s.shard, s.pos, lo.snap AS lo_snap, hi.snap AS hi_snap
          FROM "public"."outbox_event_shard" s
          JOIN "public"."outbox_event_tick" lo ON lo.tick = s.lo_tick
          LEFT JOIN "public"."outbox_event_tick" hi ON hi.tick = s.hi_tick
          WHERE s.shard >= $3
          ORDER BY s.shard) c
    CROSS JOIN LATERAL (
        SELECT r.event_id, bool_and(r.ok) OVER (ORDER BY r.seq) AS prefix_ok
        FROM (SELECT o.event_id, o.seq, (o.created_at < now() - make_interval(secs => $1)
                      AND (pg_visible_in_snapshot(o.txid, c.lo_snap)
                           OR (o.seq <= c.pos AND pg_visible_in_snapshot(o.txid, c.hi_snap)))) IS TRUE AS ok
              FROM "public"."outbox_event" o
              WHERE o.shard = c.shard
                AND (SELECT (f.created_at < now() - make_interval(secs => $1)
                      AND (pg_visible_in_snapshot(f.txid, c.lo_snap)
                           OR (f.seq <= c.pos AND pg_visible_in_snapshot(f.txid, c.hi_snap)))) IS TRUE FROM "public"."outbox_event" f WHERE f.shard = c.shard ORDER BY f.seq LIMIT 1)
              ORDER BY o.seq LIMIT $2) r) p
    WHERE p.prefix_ok
    LIMIT $2),
moved AS (DELETE FROM "public"."outbox_event" o WHERE o.event_id = ANY (ARRAY(SELECT event_id FROM v)) RETURNING o.*),
archived AS (INSERT INTO "public"."outbox_event_archive" (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, event_version, destination, message_key, payload, headers, created_at, txid, seq, shard, state)
    SELECT event_id, aggregate_type, aggregate_id, aggregate_version, event_type, event_version, destination, message_key, payload, headers, created_at, txid, seq, shard, 'PASSED' FROM moved)
SELECT count(*), max(shard) FROM moved
