-- Read: the non-terminal rows by status
SELECT
    count(*) FILTER (WHERE status = 'PENDING'),
    count(*) FILTER (WHERE status = 'SENDING'),
    count(*) FILTER (WHERE status = 'RETRY'),
    count(*) FILTER (WHERE status = 'SENDING' AND lease_until < now()),
    min(created_at)
FROM "public"."outbox_event" WHERE status IN ('PENDING', 'SENDING', 'RETRY')
