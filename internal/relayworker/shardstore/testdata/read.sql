-- Read (prepared on the read connection, 32 shards): $1 tokens, $2 batch size, $3 first shard
WITH nw AS (SELECT tick, snap, seq_after, at FROM "public"."outbox_event_tick" ORDER BY tick DESC LIMIT 1),
w AS (
    SELECT l.shard, l.owner, c.pos, c.lo_tick, lo.snap AS lo_snap, lo.seq_before AS lo_seq,
           COALESCE(fx.tick, nw.tick) AS hi_tick, COALESCE(fx.snap, nw.snap) AS hi_snap,
           COALESCE(fx.seq_after, nw.seq_after) AS hi_seq, (extract(epoch FROM COALESCE(fx.at, nw.at)) * 1000000)::bigint AS hi_stamp
    FROM "public"."outbox_event_lease" l
    CROSS JOIN LATERAL (SELECT c.lo_tick, c.hi_tick, c.pos FROM "public"."outbox_event_cursor" c
      WHERE c.shard = l.shard ORDER BY c.id DESC LIMIT 1) c
    JOIN "public"."outbox_event_tick" lo ON lo.tick = c.lo_tick
    LEFT JOIN "public"."outbox_event_tick" fx ON fx.tick = c.hi_tick
    CROSS JOIN nw
    WHERE l.owner = ANY ($1::text[])
    ORDER BY (l.shard - $3::int + 32) % 32
)
SELECT w.shard, w.owner, w.lo_tick, w.hi_tick, w.hi_stamp, e.seq, e.event_id, e.aggregate_type, e.aggregate_id, e.aggregate_version,
       e.event_type, e.event_version, e.destination, e.message_key, e.payload, e.headers, e.created_at,
       (SELECT (extract(epoch FROM now()) * 1e6)::bigint),
       e.seq IS NOT NULL AND (SELECT EXISTS (SELECT FROM "public"."outbox_event_hold" WHERE state IN ('RETRY', 'HELD')))
         AND EXISTS (SELECT FROM "public"."outbox_event_hold" h
           WHERE h.aggregate_type = e.aggregate_type AND h.aggregate_id = e.aggregate_id AND h.state IN ('RETRY', 'HELD'))
FROM w CROSS JOIN LATERAL (
    (SELECT p.*
     FROM pg_snapshot_xip(w.lo_snap) AS en(id)
     CROSS JOIN LATERAL (SELECT o.seq, o.event_id, o.aggregate_type, o.aggregate_id, o.aggregate_version, o.event_type,
            o.event_version, o.destination, o.message_key, o.payload, o.headers, o.created_at
         FROM "public"."outbox_event" o
         WHERE o.shard = w.shard AND o.txid = en.id AND o.seq + 0 > COALESCE(w.pos, 0) AND o.seq + 0 <= w.lo_seq
         OFFSET 0) p
     WHERE pg_visible_in_snapshot(en.id, w.hi_snap)
     ORDER BY p.seq LIMIT $2)
    UNION ALL
    (SELECT o.seq, o.event_id, o.aggregate_type, o.aggregate_id, o.aggregate_version, o.event_type,
            o.event_version, o.destination, o.message_key, o.payload, o.headers, o.created_at
     FROM "public"."outbox_event" o
     WHERE o.shard = w.shard AND o.seq > GREATEST(w.pos, w.lo_seq) AND o.seq <= w.hi_seq
       AND pg_visible_in_snapshot(o.txid, w.hi_snap) AND NOT pg_visible_in_snapshot(o.txid, w.lo_snap)
     ORDER BY o.seq LIMIT $2)
    UNION ALL
    SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE w.pos IS NOT NULL
) e
LIMIT $2
