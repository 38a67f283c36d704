-- reshardStatements: to 64 shards, before v2_migrate.sql, only while the table is empty
DROP VIEW IF EXISTS "public"."outbox_event_status";
ALTER TABLE "public"."outbox_event" DROP COLUMN shard;
ALTER TABLE "public"."outbox_event" ADD COLUMN shard smallint NOT NULL GENERATED ALWAYS AS ((hashtextextended(aggregate_type || '/' || aggregate_id, 0) & 63)::smallint) STORED;
UPDATE "public"."outbox_event_contract" SET shards = 64;
