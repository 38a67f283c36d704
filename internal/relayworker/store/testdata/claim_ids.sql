-- ClaimIDs: the ids e-1, e-2, e-3, token worker-1/0123456789abcdef, lease 30s
SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; WITH cand AS (
    SELECT o.event_id, o.aggregate_type, o.aggregate_id, o.aggregate_version, o.status FROM "public"."outbox_event" o
    WHERE o.event_id = ANY (ARRAY['e-1','e-2','e-3']::text[]) AND o.status = 'PENDING'
    FOR UPDATE SKIP LOCKED
), ok AS (
    SELECT c.event_id, c.status = 'SENDING' AS expired
    FROM cand c
    WHERE NOT EXISTS (SELECT 1 FROM "public"."outbox_event" p
        WHERE p.aggregate_type = c.aggregate_type AND p.aggregate_id = c.aggregate_id
          AND p.aggregate_version < c.aggregate_version
          AND p.status IN ('PENDING', 'SENDING', 'RETRY')
          AND p.event_id NOT IN (SELECT event_id FROM cand) OFFSET 0)
), durability AS (
    -- The claim's commit need not wait for its WAL flush: a claim lost in a crash
    -- only hands its rows back as they were (PENDING/RETRY), so they are published
    -- again (a duplicate, never a loss). Every mark stays a synchronous commit, and
    -- flushes the claim's WAL with its own.
    SELECT set_config('synchronous_commit', 'off', true) AS v
)
UPDATE "public"."outbox_event" t
SET status = 'SENDING', owner_token = 'worker-1/0123456789abcdef',
    lease_until = now() + '30000 milliseconds'::interval, next_retry_at = now() + '30000 milliseconds'::interval,
    updated_at = now()
FROM ok, durability
WHERE t.event_id = ok.event_id AND t.event_id = ANY (ARRAY(SELECT event_id FROM ok))
RETURNING t.event_id, t.aggregate_type, t.aggregate_id, t.aggregate_version, t.event_type,
    t.event_version, t.destination, t.message_key, t.payload, t.headers, t.retry_count,
    t.created_at, EXTRACT(EPOCH FROM now() - t.created_at)::float8, ok.expired
