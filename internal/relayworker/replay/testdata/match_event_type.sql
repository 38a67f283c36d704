-- match: a selector with only an event type
SELECT event_id FROM "public"."outbox_event" WHERE status = $1 AND event_type = $2 ORDER BY aggregate_type, aggregate_id, aggregate_version LIMIT $3
