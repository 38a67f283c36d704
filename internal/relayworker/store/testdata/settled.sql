-- Settled: $1 ids a claim by id left
SELECT event_id FROM "public"."outbox_event" WHERE event_id = ANY ($1::text[]) AND status <> 'PENDING'
