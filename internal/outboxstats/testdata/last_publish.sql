-- Read: the newest sent_at
SELECT max(sent_at) FROM "public"."outbox_event" WHERE status = 'SENT'
