-- trimConsumerLog: finished dedup rows past the retention
WITH v AS (
    SELECT consumer_group, event_id FROM "public"."message_consume"
    WHERE status <> 'PROCESSING' AND updated_at < now() - make_interval(secs => $1)
    LIMIT $2 FOR UPDATE SKIP LOCKED)
DELETE FROM "public"."message_consume" c USING v WHERE c.consumer_group = v.consumer_group AND c.event_id = v.event_id
