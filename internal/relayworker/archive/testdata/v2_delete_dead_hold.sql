-- runV2, delete mode: DEAD hold rows by updated_at
WITH v AS (SELECT event_id FROM "public"."outbox_event_hold" WHERE state = 'DEAD' AND updated_at < now() - make_interval(secs => $1) ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED)
DELETE FROM "public"."outbox_event_hold" h USING v WHERE h.event_id = v.event_id AND h.state = 'DEAD'
