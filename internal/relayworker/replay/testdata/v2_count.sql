-- settle and finish, v2: sent (hold row gone), DEAD and in-flight among $1 ids
SELECT
		count(*) FILTER (WHERE h.event_id IS NULL),
		count(*) FILTER (WHERE h.state = 'DEAD'),
		count(*) FILTER (WHERE h.state IN ('RETRY', 'HELD'))
		FROM unnest($1::text[]) AS x(event_id) LEFT JOIN "public"."outbox_event_hold" h ON h.event_id = x.event_id
