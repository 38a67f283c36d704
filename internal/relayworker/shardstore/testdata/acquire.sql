-- Acquire: $1 fresh token, $2 lease, $3 how many
UPDATE "public"."outbox_event_shard" s SET owner = $1, lease_until = now() + $2::interval
FROM (SELECT shard FROM "public"."outbox_event_shard" WHERE owner IS NULL OR lease_until < now()
      ORDER BY shard LIMIT $3 FOR UPDATE SKIP LOCKED) f
WHERE s.shard = f.shard AND (s.owner IS NULL OR s.lease_until < now())
RETURNING s.shard
