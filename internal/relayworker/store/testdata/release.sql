-- Release (prepared): $1 token, $2 ids
UPDATE "public"."outbox_event" t
SET status = CASE WHEN t.retry_count = 0 THEN 'PENDING' ELSE 'RETRY' END,
    owner_token = NULL, lease_until = NULL, next_retry_at = now(), updated_at = now()
WHERE t.event_id = ANY($2::text[]) AND t.owner_token = $1 AND t.status = 'SENDING'
