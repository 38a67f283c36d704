-- Tick, 2nd statement: $1 seq_before; records the tick only when needed
INSERT INTO "public"."outbox_event_tick" (tick, snap, snap_xmax, xid_after, seq_before, seq_after)
SELECT nw.tick + 1, pg_current_snapshot(), pg_snapshot_xmax(pg_current_snapshot()), pg_current_xact_id(),
       $1, COALESCE(pg_sequence_last_value('"public"."outbox_event_seq"'), 0)
FROM (SELECT tick, snap, snap_xmax, xid_after, seq_before FROM "public"."outbox_event_tick" ORDER BY tick DESC LIMIT 1) nw
WHERE $1 > nw.seq_before
   OR cardinality(ARRAY(SELECT x FROM pg_snapshot_xip(nw.snap) x WHERE pg_visible_in_snapshot(x, pg_current_snapshot())
      UNION ALL SELECT g::text::xid8 FROM generate_series(nw.snap_xmax::text::bigint, nw.xid_after::text::bigint - 1) g
      WHERE pg_visible_in_snapshot(g::text::xid8, pg_current_snapshot()))) > 0
RETURNING tick
