-- Rebalance, after Renew: delete expired tokens that hold no shard
DELETE FROM "public"."outbox_event_token" k
WHERE k.lease_until < now() AND NOT EXISTS (SELECT FROM "public"."outbox_event_lease" l WHERE l.owner = k.token)
