-- ReleaseParked: $1 ids, $2 the tokens that marked them RETRY
UPDATE "public"."outbox_event" t SET next_retry_at = now(), updated_at = now()
FROM unnest($1::text[], $2::text[]) AS u(id, tok)
WHERE t.event_id = u.id AND t.owner_token = u.tok AND t.status = 'RETRY' AND t.next_retry_at > now()
