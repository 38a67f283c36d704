-- Release: $1 shards, $2 their tokens; at a window boundary only
UPDATE "public"."outbox_event_shard" s SET owner = NULL, lease_until = NULL
FROM unnest($1::smallint[], $2::text[]) AS u(shard, token)
WHERE s.shard = u.shard AND s.owner = u.token AND s.pos IS NULL
RETURNING s.shard
