-- Tick, after the idle close: trim the ticks below every lo_tick (asynchronous commit)
DELETE FROM "public"."outbox_event_tick" WHERE tick < (SELECT min(lo_tick) FROM "public"."outbox_event_shard")
  AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
