-- ReleaseAll: $1 shards, $2 their tokens
UPDATE "public"."outbox_event_shard" s SET owner = NULL, lease_until = NULL
FROM unnest($1::smallint[], $2::text[]) AS u(shard, token)
WHERE s.shard = u.shard AND s.owner = u.token
RETURNING s.shard
