-- LeaseState: $1 the lease (live = heartbeat within it)
SELECT (SELECT count(*) FROM "public"."outbox_event_workers" WHERE heartbeat_at > now() - $1::interval)::int,
       s.shard, COALESCE(s.owner, ''), COALESCE(s.lease_until < now(), true), s.pos IS NULL
FROM "public"."outbox_event_shard" s ORDER BY s.shard
