-- Tick, 1st statement: $1 the tick lock's key; returns seq_before and whether a tick looks needed; the tick commits asynchronously
SELECT s.v, s.v > nw.seq_before
       OR EXISTS (SELECT FROM pg_snapshot_xip(nw.snap) x WHERE pg_visible_in_snapshot(x, pg_current_snapshot())),
       nw.tick
FROM (SELECT COALESCE(pg_sequence_last_value('"public"."outbox_event_seq"'), 0) AS v
      FROM pg_advisory_xact_lock(hashtext($1)), set_config('synchronous_commit', 'off', true)) s,
     (SELECT tick, seq_before, snap FROM "public"."outbox_event_tick" ORDER BY tick DESC LIMIT 1) nw
