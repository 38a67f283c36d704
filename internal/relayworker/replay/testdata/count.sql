-- settle and finish: SENT, DEAD and in-flight among $1 ids
SELECT
		count(*) FILTER (WHERE status = 'SENT'),
		count(*) FILTER (WHERE status = 'DEAD'),
		count(*) FILTER (WHERE status IN ('PENDING', 'SENDING', 'RETRY'))
		FROM "public"."outbox_event" WHERE event_id = ANY($1)
