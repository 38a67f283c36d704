-- Tick, after its commit on every IdleTicks-th tick: $1 close empty windows whose lo_tick is below it (asynchronous commit)
WITH nw AS (SELECT tick, snap, seq_after FROM "public"."outbox_event_tick" ORDER BY tick DESC LIMIT 1),
durability AS (SELECT set_config('synchronous_commit', 'off', true) AS v),
idle AS (
  SELECT s.shard, nw.tick FROM "public"."outbox_event_shard" s, nw, durability, "public"."outbox_event_tick" lo
  WHERE lo.tick = s.lo_tick AND s.lo_tick < $1 AND s.owner = ANY ($2::text[]) AND s.pos IS NULL AND s.hi_tick IS NULL
    AND NOT EXISTS (SELECT FROM pg_snapshot_xip(lo.snap) AS en(id)
                    WHERE pg_visible_in_snapshot(en.id, nw.snap)
                      AND EXISTS (SELECT FROM "public"."outbox_event" o
                                  WHERE o.shard = s.shard AND o.txid = en.id AND o.seq + 0 <= lo.seq_before OFFSET 0))
    AND NOT EXISTS (SELECT FROM "public"."outbox_event" o
                    WHERE o.shard = s.shard AND o.seq > lo.seq_before AND o.seq <= nw.seq_after
                      AND pg_visible_in_snapshot(o.txid, nw.snap) AND NOT pg_visible_in_snapshot(o.txid, lo.snap) OFFSET 0)
  FOR UPDATE OF s SKIP LOCKED
)
UPDATE "public"."outbox_event_shard" s SET lo_tick = idle.tick
FROM idle WHERE s.shard = idle.shard
