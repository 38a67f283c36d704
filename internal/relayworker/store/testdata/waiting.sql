-- Waiting: does any row wait to be sent now
SELECT EXISTS (SELECT 1 FROM "public"."outbox_event" WHERE status IN ('PENDING', 'SENDING', 'RETRY')
    AND (status <> 'RETRY' OR next_retry_at <= now()))
