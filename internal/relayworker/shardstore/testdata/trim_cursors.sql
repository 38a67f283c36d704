-- Tick, after the tick trim: $1 tokens, $2 shards and $3 the newest cursor id the last trim kept; returns each held shard's newest id (asynchronous commit)
WITH n AS (
    SELECT l.shard, COALESCE(f.floor, 0) AS floor, (SELECT c.id FROM "public"."outbox_event_cursor" c
      WHERE c.shard = l.shard ORDER BY c.id DESC LIMIT 1) AS newest
    FROM "public"."outbox_event_lease" l
    LEFT JOIN unnest($2::smallint[], $3::bigint[]) AS f(shard, floor) ON f.shard = l.shard
    WHERE l.owner = ANY ($1::text[])
), gone AS (
    DELETE FROM "public"."outbox_event_cursor" c USING n
    WHERE c.shard = n.shard AND c.id >= n.floor AND c.id < n.newest
      AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
)
SELECT shard, newest FROM n WHERE newest IS NOT NULL
