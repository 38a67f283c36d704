-- ReleaseAll, then: $1 worker id
DELETE FROM "public"."outbox_event_workers" WHERE worker_id = $1
