-- Read: the DEAD rows
SELECT count(*) FROM "public"."outbox_event" WHERE status = 'DEAD'
