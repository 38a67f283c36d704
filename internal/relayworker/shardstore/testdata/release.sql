-- Release: $1 shards, $2 their tokens; at a window boundary only
UPDATE "public"."outbox_event_lease" l SET owner = NULL
FROM unnest($1::smallint[], $2::text[]) AS u(shard, token)
WHERE l.shard = u.shard AND l.owner = u.token
  AND (SELECT c.pos FROM "public"."outbox_event_cursor" c
      WHERE c.shard = l.shard ORDER BY c.id DESC LIMIT 1) IS NULL
RETURNING l.shard
