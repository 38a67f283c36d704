-- Acquire: $1 fresh token, $2 lease, $3 how many
WITH f AS (
    SELECT l.shard FROM "public"."outbox_event_lease" l LEFT JOIN "public"."outbox_event_token" k ON k.token = l.owner
    WHERE l.owner IS NULL OR k.lease_until IS NULL OR k.lease_until < now()
    ORDER BY l.shard LIMIT $3
    FOR UPDATE OF l SKIP LOCKED
), took AS (
    UPDATE "public"."outbox_event_lease" l SET owner = $1 FROM f WHERE l.shard = f.shard
    RETURNING l.shard
), tok AS (
    INSERT INTO "public"."outbox_event_token" (token, lease_until)
    SELECT $1, now() + $2::interval WHERE EXISTS (SELECT FROM took)
)
SELECT shard FROM took
