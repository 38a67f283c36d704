-- Tick, after its commit on every IdleTicks-th tick: $1 close empty windows whose lo_tick is below it (asynchronous commit)
WITH nw AS (SELECT tick, snap, seq_after FROM "public"."outbox_event_tick" ORDER BY tick DESC LIMIT 1),
durability AS (SELECT set_config('synchronous_commit', 'off', true) AS v),
idle AS (
  SELECT l.shard, nw.tick FROM "public"."outbox_event_lease" l
  CROSS JOIN LATERAL (SELECT c.lo_tick, c.hi_tick, c.pos FROM "public"."outbox_event_cursor" c
      WHERE c.shard = l.shard ORDER BY c.id DESC LIMIT 1) c
  JOIN "public"."outbox_event_tick" lo ON lo.tick = c.lo_tick
  CROSS JOIN nw CROSS JOIN durability
  WHERE c.lo_tick < $1 AND l.owner = ANY ($2::text[]) AND c.pos IS NULL AND c.hi_tick IS NULL
    AND NOT EXISTS (SELECT FROM pg_snapshot_xip(lo.snap) AS en(id)
                    WHERE pg_visible_in_snapshot(en.id, nw.snap)
                      AND EXISTS (SELECT FROM "public"."outbox_event" o
                                  WHERE o.shard = l.shard AND o.txid = en.id AND o.seq + 0 <= lo.seq_before OFFSET 0))
    AND NOT EXISTS (SELECT FROM "public"."outbox_event" o
                    WHERE o.shard = l.shard AND o.seq > lo.seq_before AND o.seq <= nw.seq_after
                      AND pg_visible_in_snapshot(o.txid, nw.snap) AND NOT pg_visible_in_snapshot(o.txid, lo.snap) OFFSET 0)
  ORDER BY l.shard
  FOR NO KEY UPDATE OF l SKIP LOCKED
)
INSERT INTO "public"."outbox_event_cursor" (shard, lo_tick)
SELECT shard, tick FROM idle ORDER BY shard
