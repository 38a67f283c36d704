-- runV2: batch log rows older than the sent retention
WITH v AS (
    SELECT batch, at FROM "public"."outbox_event_batch" ORDER BY batch LIMIT $2)
DELETE FROM "public"."outbox_event_batch" b USING v WHERE b.batch = v.batch AND v.at < now() - make_interval(secs => $1)
