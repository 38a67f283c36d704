-- Renew: $1 shards, $2 their tokens, $3 lease
WITH kept AS (
    SELECT l.shard, l.owner FROM unnest($1::smallint[], $2::text[]) AS u(shard, token)
    JOIN "public"."outbox_event_lease" l ON l.shard = u.shard AND l.owner = u.token
), tok AS (
    INSERT INTO "public"."outbox_event_token" (token, lease_until)
    SELECT DISTINCT owner, now() + $3::interval FROM kept
    ON CONFLICT (token) DO UPDATE SET lease_until = EXCLUDED.lease_until
)
SELECT shard FROM kept
