-- ReleaseAll: $1 shards, $2 their tokens
UPDATE "public"."outbox_event_lease" l SET owner = NULL
FROM unnest($1::smallint[], $2::text[]) AS u(shard, token)
WHERE l.shard = u.shard AND l.owner = u.token
RETURNING l.shard
