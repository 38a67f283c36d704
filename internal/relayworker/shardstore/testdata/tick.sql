-- Tick, 2nd statement: $1 seq_before; records the tick only when needed
INSERT INTO "public"."outbox_event_tick" (tick, snap, snap_xmax, seq_before, seq_after)
SELECT nw.tick + 1, ts.snap, pg_snapshot_xmax(ts.snap),
       $1, COALESCE(pg_sequence_last_value('"public"."outbox_event_seq"'), 0)
FROM (SELECT tick, snap, seq_before FROM "public"."outbox_event_tick" ORDER BY tick DESC LIMIT 1) nw
CROSS JOIN LATERAL (SELECT (SELECT (pg_snapshot_xmin(c.s)::text || ':' || c.hi::text || ':' ||
         array_to_string(ARRAY(SELECT x::text::bigint FROM pg_snapshot_xip(c.s) x
                               UNION
                               SELECT generate_series(pg_snapshot_xmax(c.s)::text::bigint, c.hi::text::bigint - 1)
                               ORDER BY 1), ','))::pg_snapshot
 FROM (SELECT pg_current_snapshot() AS s,
              GREATEST(pg_snapshot_xmax(pg_current_snapshot()), pg_current_xact_id()) AS hi) c) AS snap) ts
WHERE $1 > nw.seq_before
   OR EXISTS (SELECT FROM pg_snapshot_xip(nw.snap) x WHERE pg_visible_in_snapshot(x, pg_current_snapshot()))
RETURNING tick
