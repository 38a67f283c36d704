-- Tick's trim round, beside the loop: the least lo_tick of any shard
SELECT min(lo_tick) FROM "public"."outbox_event_shard"
