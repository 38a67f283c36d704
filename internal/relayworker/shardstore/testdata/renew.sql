-- Renew: $1 shards, $2 their tokens, $3 lease
UPDATE "public"."outbox_event_shard" s SET lease_until = now() + $3::interval
FROM unnest($1::smallint[], $2::text[]) AS u(shard, token)
WHERE s.shard = u.shard AND s.owner = u.token
RETURNING s.shard
