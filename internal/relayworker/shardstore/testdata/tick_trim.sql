-- Tick's trim round: $1 where the last one stopped, $2 the least lo_tick (asynchronous commit)
DELETE FROM "public"."outbox_event_tick" WHERE tick >= $1 AND tick < $2
  AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
