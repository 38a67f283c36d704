-- runV2: batch log rows older than the sent retention
DELETE FROM "public"."outbox_event_batch" WHERE batch = ANY (ARRAY(
    SELECT batch FROM (SELECT batch, at FROM "public"."outbox_event_batch" ORDER BY batch LIMIT $2) v
    WHERE v.at < now() - make_interval(secs => $1)))
