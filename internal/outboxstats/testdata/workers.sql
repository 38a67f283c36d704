-- Read, last: the fresh worker reports
SELECT
    count(*),
    count(*) FILTER (WHERE NOT broker_up),
    min(broker_down_since) FILTER (WHERE NOT broker_up),
    mode() WITHIN GROUP (ORDER BY broker_error_code) FILTER (WHERE NOT broker_up)
FROM "public"."outbox_event_workers" WHERE heartbeat_at > now() - make_interval(secs => $1)
