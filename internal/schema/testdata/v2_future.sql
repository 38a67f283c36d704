-- VerifyV2's txids from the future: 32 shards
WITH cur AS (SELECT pg_snapshot_xmax(pg_current_snapshot()) AS xmax)
SELECT COALESCE((SELECT top::text FROM (
           SELECT (SELECT o.txid FROM "public"."outbox_event" o WHERE o.shard = g::smallint ORDER BY o.txid DESC LIMIT 1) AS top
           FROM generate_series(0, 31) g) s, cur
       WHERE s.top >= cur.xmax ORDER BY s.top DESC LIMIT 1), ''),
       COALESCE((SELECT k.snap_xmax::text FROM "public"."outbox_event_tick" k, cur
       WHERE k.snap_xmax > cur.xmax ORDER BY k.snap_xmax DESC LIMIT 1), ''),
       (SELECT xmax::text FROM cur)
