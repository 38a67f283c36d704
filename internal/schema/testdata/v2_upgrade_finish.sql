-- finishUpgradeSQL
UPDATE "public"."outbox_event_upgrade" SET state = 'done', finished_at = now(), updated_at = now()
WHERE state = 'copying'
