-- MarkSent (prepared): $1 token, $2 ids, $3 partitions, $4 offsets
UPDATE "public"."outbox_event" t
SET status = 'SENT', sent_at = now(), updated_at = now(), lease_until = NULL,
    broker_partition = NULLIF(u.p, -1), broker_offset = NULLIF(u.o, -1),
    last_error_code = NULL, last_error_message = NULL
FROM unnest($2::text[], $3::int[], $4::bigint[]) AS u(id, p, o)
WHERE t.event_id = u.id AND t.owner_token = $1 AND t.status = 'SENDING'
