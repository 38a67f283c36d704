-- Tick, 4th statement: trim the ticks below every lo_tick
DELETE FROM "public"."outbox_event_tick" WHERE tick < (SELECT min(lo_tick) FROM "public"."outbox_event_shard")
