-- MarkRetry (prepared): $1 token, $2 max attempts, $3 ids, $4 codes, $5 messages, $6 delays (ms), $7 uncounted
UPDATE "public"."outbox_event" t
SET status = CASE WHEN NOT u.uncounted AND t.retry_count + 1 >= $2 THEN 'DEAD' ELSE 'RETRY' END,
    retry_count = t.retry_count + CASE WHEN u.uncounted THEN 0 ELSE 1 END,
    next_retry_at = now() + u.delay_ms * interval '1 millisecond',
    last_error_code = CASE WHEN NOT u.uncounted AND t.retry_count + 1 >= $2 THEN 'MAX_ATTEMPTS' ELSE u.code END,
    last_error_message = CASE WHEN NOT u.uncounted AND t.retry_count + 1 >= $2 THEN u.code || ': ' || u.msg ELSE u.msg END,
    lease_until = NULL, updated_at = now()
FROM unnest($3::text[], $4::text[], $5::text[], $6::bigint[], $7::bool[]) AS u(id, code, msg, delay_ms, uncounted)
WHERE t.event_id = u.id AND t.owner_token = $1 AND t.status = 'SENDING'
RETURNING t.event_id, t.status
