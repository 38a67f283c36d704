-- Backlog (prepared): the pending gauges
SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8
FROM "public"."outbox_event" WHERE status IN ('PENDING', 'SENDING', 'RETRY')
