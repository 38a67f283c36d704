-- Tick, after the idle close: trim the ticks below every lo_tick (asynchronous commit)
WITH b AS (SELECT min(lo_tick) AS lo FROM "public"."outbox_event_shard"),
gone AS (
    DELETE FROM "public"."outbox_event_tick" k USING b
    WHERE k.tick >= $1 AND k.tick < b.lo
      AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
)
SELECT lo FROM b
