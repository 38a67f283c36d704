-- moveBatch, delete mode, DEAD rows by updated_at
WITH v AS (SELECT event_id FROM "public"."outbox_event" WHERE status = $1 AND updated_at < now() - make_interval(secs => $2) ORDER BY updated_at LIMIT $3 FOR UPDATE SKIP LOCKED)
DELETE FROM "public"."outbox_event" o USING v WHERE o.event_id = v.event_id AND o.status = $1
