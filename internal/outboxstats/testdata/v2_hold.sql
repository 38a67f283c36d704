-- Read of a v2 table: the hold rows by state, the oldest open one
SELECT count(*) FILTER (WHERE state = 'RETRY'),
       count(*) FILTER (WHERE state = 'HELD'),
       count(*) FILTER (WHERE state = 'DEAD'),
       min(created_at) FILTER (WHERE state IN ('RETRY', 'HELD'))
FROM "public"."outbox_event_hold"
