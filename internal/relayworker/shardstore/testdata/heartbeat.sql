-- Heartbeat: $1 worker id
INSERT INTO "public"."outbox_event_workers" AS w (worker_id) VALUES ($1)
ON CONFLICT (worker_id) DO UPDATE SET heartbeat_at = now()
