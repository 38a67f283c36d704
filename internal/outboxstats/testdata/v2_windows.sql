-- Read of a v2 table: the rows of every shard's open windows ($1 the per-shard cap), shards worked on and abandoned
WITH nw AS (
    SELECT pg_current_snapshot() AS snap,
           COALESCE(pg_sequence_last_value('"public"."outbox_event_seq"'), 0) AS last_seq
),
w AS (
    SELECT s.shard, s.owner, s.lease_until, s.pos, nw.snap AS now_snap, nw.last_seq,
           lo.snap AS lo_snap, lo.seq_before AS lo_seq,
           COALESCE(fx.snap, nw.snap) AS hi_snap, COALESCE(fx.seq_after, nw.last_seq) AS hi_seq,
           fx.snap AS fx_snap, fx.seq_before AS fx_seq
    FROM "public"."outbox_event_shard" s
    JOIN "public"."outbox_event_tick" lo ON lo.tick = s.lo_tick
    LEFT JOIN "public"."outbox_event_tick" fx ON fx.tick = s.hi_tick
    CROSS JOIN nw
),
c AS (
    SELECT w.shard, w.owner, w.lease_until, w.pos, r.n, r.oldest,
           CASE WHEN r.n1 >= $1 AND r.max1 > r.min1 THEN floor((w.hi_seq - r.max1) * (r.n1 - 1)::numeric / (r.max1 - r.min1)) ELSE 0 END
         + CASE WHEN r.n3 >= $1 AND r.max3 > r.min3 THEN floor((w.last_seq - r.max3) * (r.n3 - 1)::numeric / (r.max3 - r.min3)) ELSE 0 END AS extra,
           r.n0 >= $1 OR r.n1 >= $1 OR r.n2 >= $1 OR r.n3 >= $1 AS capped
    FROM w CROSS JOIN LATERAL (
        SELECT count(*) AS n, min(e.created_at) AS oldest,
               count(*) FILTER (WHERE e.part = 0) AS n0, count(*) FILTER (WHERE e.part = 2) AS n2,
               count(*) FILTER (WHERE e.part = 1) AS n1, min(e.seq) FILTER (WHERE e.part = 1) AS min1, max(e.seq) FILTER (WHERE e.part = 1) AS max1,
               count(*) FILTER (WHERE e.part = 3) AS n3, min(e.seq) FILTER (WHERE e.part = 3) AS min3, max(e.seq) FILTER (WHERE e.part = 3) AS max3
        FROM (
            (SELECT 0 AS part, p.seq, p.created_at
             FROM pg_snapshot_xip(w.lo_snap) AS en(id)
             CROSS JOIN LATERAL (SELECT o.seq, o.created_at FROM "public"."outbox_event" o
                 WHERE o.shard = w.shard AND o.txid = en.id AND o.seq + 0 > COALESCE(w.pos, 0) AND o.seq + 0 <= w.lo_seq
                 OFFSET 0) p
             WHERE pg_visible_in_snapshot(en.id, w.hi_snap) LIMIT $1)
            UNION ALL
            (SELECT 1 AS part, o.seq, o.created_at FROM "public"."outbox_event" o
             WHERE o.shard = w.shard AND o.seq > GREATEST(w.pos, w.lo_seq) AND o.seq <= w.hi_seq
               AND pg_visible_in_snapshot(o.txid, w.hi_snap) AND NOT pg_visible_in_snapshot(o.txid, w.lo_snap)
             ORDER BY o.seq LIMIT $1)
            UNION ALL
            (SELECT 2 AS part, p.seq, p.created_at
             FROM pg_snapshot_xip(w.fx_snap) AS en(id)
             CROSS JOIN LATERAL (SELECT o.seq, o.created_at FROM "public"."outbox_event" o
                 WHERE o.shard = w.shard AND o.txid = en.id AND o.seq + 0 <= w.fx_seq
                 OFFSET 0) p
             WHERE pg_visible_in_snapshot(en.id, w.now_snap) LIMIT $1)
            UNION ALL
            (SELECT 3 AS part, o.seq, o.created_at FROM "public"."outbox_event" o
             WHERE w.fx_snap IS NOT NULL AND o.shard = w.shard AND o.seq > w.fx_seq AND o.seq <= w.last_seq
               AND pg_visible_in_snapshot(o.txid, w.now_snap) AND NOT pg_visible_in_snapshot(o.txid, w.fx_snap)
             ORDER BY o.seq LIMIT $1)
        ) e
    ) r
)
SELECT COALESCE(sum(n + extra), 0)::bigint,
       min(oldest),
       count(*) FILTER (WHERE owner IS NOT NULL AND lease_until >= now() AND (n > 0 OR pos IS NOT NULL)),
       count(*) FILTER (WHERE owner IS NOT NULL AND lease_until < now()),
       COALESCE(bool_or(capped), false)
FROM c
