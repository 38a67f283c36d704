-- MarkDead (prepared): $1 token, $2 ids, $3 codes, $4 messages
UPDATE "public"."outbox_event" t
SET status = 'DEAD', last_error_code = u.code, last_error_message = u.msg,
    retry_count = t.retry_count + 1, lease_until = NULL, updated_at = now()
FROM unnest($2::text[], $3::text[], $4::text[]) AS u(id, code, msg)
WHERE t.event_id = u.id AND t.owner_token = $1 AND t.status = 'SENDING'
