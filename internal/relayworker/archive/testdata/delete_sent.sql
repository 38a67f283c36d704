-- moveBatch, delete mode, SENT rows by sent_at
WITH v AS (SELECT event_id FROM "public"."outbox_event" WHERE status = $1 AND sent_at < now() - make_interval(secs => $2) ORDER BY sent_at LIMIT $3 FOR UPDATE SKIP LOCKED)
DELETE FROM "public"."outbox_event" o USING v WHERE o.event_id = v.event_id AND o.status = $1
