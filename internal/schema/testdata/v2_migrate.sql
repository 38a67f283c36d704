-- V2Statements: public.outbox_event, 32 shards, separated by ;
CREATE SEQUENCE IF NOT EXISTS "public"."outbox_event_seq" AS bigint CACHE 1;

CREATE TABLE IF NOT EXISTS "public"."outbox_event" (
    event_id           text        PRIMARY KEY,
    aggregate_type     text        NOT NULL,
    aggregate_id       text        NOT NULL,
    aggregate_version  bigint      NOT NULL,
    event_type         text        NOT NULL,
    event_version      int         NOT NULL DEFAULT 1,
    destination        text        NOT NULL,
    message_key        text        NOT NULL,
    payload            json        NOT NULL,
    headers            json        NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    txid               xid8        NOT NULL DEFAULT pg_current_xact_id(),
    seq                bigint      NOT NULL DEFAULT (CASE WHEN pg_current_xact_id() IS NOT NULL THEN nextval('"public"."outbox_event_seq"') END),
    shard              smallint    NOT NULL GENERATED ALWAYS AS ((hashtextextended(aggregate_type || '/' || aggregate_id, 0) & 31)::smallint) STORED
);

ALTER SEQUENCE "public"."outbox_event_seq" OWNED BY "public"."outbox_event".seq;

CREATE UNIQUE INDEX IF NOT EXISTS "outbox_event_version_key" ON "public"."outbox_event" (aggregate_type, aggregate_id, aggregate_version);

CREATE INDEX IF NOT EXISTS "outbox_event_seq_idx" ON "public"."outbox_event" (shard, seq);

CREATE INDEX IF NOT EXISTS "outbox_event_txid_idx" ON "public"."outbox_event" (shard, txid);

CREATE TABLE IF NOT EXISTS "public"."outbox_event_tick" (
    tick       bigint      PRIMARY KEY,
    snap       pg_snapshot NOT NULL,
    snap_xmax  xid8        NOT NULL,
    seq_before bigint      NOT NULL,
    seq_after  bigint      NOT NULL,
    at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS "public"."outbox_event_batch" (
    batch      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner      text        NOT NULL,
    shards     smallint[]  NOT NULL,
    last_seq   bigint[]    NOT NULL,
    hi_tick    bigint[]    NOT NULL,
    partitions int[]       NOT NULL,
    offsets    bigint[]    NOT NULL,
    at         timestamptz NOT NULL DEFAULT now(),
    seqs       bigint[]    NULL
);

DO $$BEGIN
    IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = '"public"."outbox_event_batch"'::regclass AND attname = 'seqs' AND NOT attisdropped) THEN
        ALTER TABLE "public"."outbox_event_batch" ADD COLUMN seqs bigint[] NULL;
    END IF;
END$$;

CREATE INDEX IF NOT EXISTS "outbox_event_batch_at" ON "public"."outbox_event_batch" (at);

CREATE TABLE IF NOT EXISTS "public"."outbox_event_hold" (
    event_id           text        PRIMARY KEY,
    aggregate_type     text        NOT NULL,
    aggregate_id       text        NOT NULL,
    aggregate_version  bigint      NOT NULL,
    event_type         text        NOT NULL,
    event_version      int         NOT NULL,
    destination        text        NOT NULL,
    message_key        text        NOT NULL,
    payload            json        NOT NULL,
    headers            json        NULL,
    created_at         timestamptz NOT NULL,
    txid               xid8        NOT NULL,
    seq                bigint      NOT NULL,
    shard              smallint    NOT NULL,
    state              text        NOT NULL CHECK (state IN ('RETRY', 'DEAD', 'HELD')),
    attempts           int         NOT NULL DEFAULT 0,
    next_attempt_at    timestamptz NOT NULL DEFAULT now(),
    last_error_code    text        NULL,
    last_error_message text        NULL,
    held_at            timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS "outbox_event_hold_due" ON "public"."outbox_event_hold" (shard, next_attempt_at) WHERE state IN ('RETRY', 'HELD');

CREATE INDEX IF NOT EXISTS "outbox_event_hold_open" ON "public"."outbox_event_hold" (aggregate_type, aggregate_id, aggregate_version) WHERE state IN ('RETRY', 'HELD');

CREATE TABLE IF NOT EXISTS "public"."outbox_event_replay_audit" (
    replay_id    text        PRIMARY KEY,
    requested_by text        NOT NULL,
    reason       text        NOT NULL,
    selector     jsonb       NOT NULL,
    dry_run      boolean     NOT NULL DEFAULT false,
    phase        text        NOT NULL,
    matched      int         NOT NULL DEFAULT 0,
    replayed     int         NOT NULL DEFAULT 0,
    succeeded    int         NOT NULL DEFAULT 0,
    dead_again   int         NOT NULL DEFAULT 0,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz NULL,
    event_ids    jsonb       NULL
);

CREATE TABLE IF NOT EXISTS "public"."outbox_event_workers" (
    worker_id         text        PRIMARY KEY,
    broker_up         boolean     NOT NULL DEFAULT true,
    broker_down_since timestamptz NULL,
    broker_error_code text        NULL,
    started_at        timestamptz NOT NULL DEFAULT now(),
    heartbeat_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS "public"."outbox_event_contract" (
    one         boolean     PRIMARY KEY DEFAULT true CHECK (one),
    version     int         NOT NULL,
    shards      int         NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    migrated_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO "public"."outbox_event_contract" (version, shards) VALUES (2, 32)
ON CONFLICT (one) DO UPDATE SET migrated_at = now();

INSERT INTO "public"."outbox_event_tick" (tick, snap, snap_xmax, seq_before, seq_after)
SELECT 1, ts.snap, pg_snapshot_xmax(ts.snap),
       COALESCE(pg_sequence_last_value('"public"."outbox_event_seq"'), 0), COALESCE(pg_sequence_last_value('"public"."outbox_event_seq"'), 0)
FROM (SELECT (SELECT (pg_snapshot_xmin(c.s)::text || ':' || c.hi::text || ':' ||
         array_to_string(ARRAY(SELECT x::text::bigint FROM pg_snapshot_xip(c.s) x
                               UNION
                               SELECT generate_series(pg_snapshot_xmax(c.s)::text::bigint, c.hi::text::bigint - 1)
                               ORDER BY 1), ','))::pg_snapshot
 FROM (SELECT pg_current_snapshot() AS s,
              GREATEST(pg_snapshot_xmax(pg_current_snapshot()), pg_current_xact_id()) AS hi) c) AS snap) ts
WHERE NOT EXISTS (SELECT FROM "public"."outbox_event_tick");

CREATE TABLE IF NOT EXISTS "public"."outbox_event_lease" (
    shard smallint PRIMARY KEY,
    owner text     NULL
);

CREATE TABLE IF NOT EXISTS "public"."outbox_event_token" (
    token       text        PRIMARY KEY,
    lease_until timestamptz NOT NULL
);

CREATE TABLE IF NOT EXISTS "public"."outbox_event_cursor" (
    shard   smallint    NOT NULL,
    id      bigint      GENERATED ALWAYS AS IDENTITY,
    lo_tick bigint      NOT NULL,
    hi_tick bigint      NULL,
    pos     bigint      NULL,
    at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (shard, id)
);

DO $$BEGIN
    IF EXISTS (SELECT FROM pg_class WHERE oid = to_regclass('"public"."outbox_event_shard"') AND relkind = 'r') THEN
        LOCK TABLE "public"."outbox_event_shard" IN ACCESS EXCLUSIVE MODE;
        DROP VIEW IF EXISTS "public"."outbox_event_status";
        INSERT INTO "public"."outbox_event_lease" (shard, owner)
            SELECT shard, owner FROM "public"."outbox_event_shard" ON CONFLICT (shard) DO NOTHING;
        INSERT INTO "public"."outbox_event_token" (token, lease_until)
            SELECT owner, max(lease_until) FROM "public"."outbox_event_shard"
            WHERE owner IS NOT NULL AND lease_until IS NOT NULL GROUP BY owner ON CONFLICT (token) DO NOTHING;
        INSERT INTO "public"."outbox_event_cursor" (shard, lo_tick, hi_tick, pos)
            SELECT shard, lo_tick, hi_tick, pos FROM "public"."outbox_event_shard" ORDER BY shard;
        DROP TABLE "public"."outbox_event_shard";
    END IF;
END$$;

DELETE FROM "public"."outbox_event_lease" WHERE shard > 31;

DELETE FROM "public"."outbox_event_cursor" WHERE shard > 31;

INSERT INTO "public"."outbox_event_lease" (shard) SELECT g FROM generate_series(0, 31) g ON CONFLICT (shard) DO NOTHING;

INSERT INTO "public"."outbox_event_cursor" (shard, lo_tick)
SELECT g, (SELECT max(tick) FROM "public"."outbox_event_tick") FROM generate_series(0, 31) g
WHERE NOT EXISTS (SELECT FROM "public"."outbox_event_cursor" c WHERE c.shard = g);

CREATE OR REPLACE VIEW "public"."outbox_event_shard" AS
SELECT l.shard, l.owner, k.lease_until, c.lo_tick, c.hi_tick, c.pos
FROM "public"."outbox_event_lease" l
LEFT JOIN "public"."outbox_event_token" k ON k.token = l.owner
CROSS JOIN LATERAL (SELECT c.lo_tick, c.hi_tick, c.pos FROM "public"."outbox_event_cursor" c
      WHERE c.shard = l.shard ORDER BY c.id DESC LIMIT 1) c;

CREATE OR REPLACE VIEW "public"."outbox_event_status" AS
SELECT o.event_id, o.aggregate_type, o.aggregate_id, o.aggregate_version, o.event_type, o.destination,
       o.message_key, o.created_at, o.shard, o.seq,
       CASE WHEN h.state IS NOT NULL THEN h.state
            WHEN pg_visible_in_snapshot(o.txid, lo.snap)
              OR (s.hi_tick IS NOT NULL AND o.seq <= s.pos AND pg_visible_in_snapshot(o.txid, hi.snap)) THEN 'SENT'
            ELSE 'PENDING' END AS status,
       COALESCE(h.attempts, 0) AS attempts, h.last_error_code, h.next_attempt_at
FROM "public"."outbox_event" o
JOIN "public"."outbox_event_shard" s ON s.shard = o.shard
JOIN "public"."outbox_event_tick" lo ON lo.tick = s.lo_tick
LEFT JOIN "public"."outbox_event_tick" hi ON hi.tick = s.hi_tick
LEFT JOIN "public"."outbox_event_hold" h ON h.event_id = o.event_id
UNION ALL
SELECT h.event_id, h.aggregate_type, h.aggregate_id, h.aggregate_version, h.event_type, h.destination,
       h.message_key, h.created_at, h.shard, h.seq, h.state, h.attempts, h.last_error_code, h.next_attempt_at
FROM "public"."outbox_event_hold" h
WHERE NOT EXISTS (SELECT FROM "public"."outbox_event" o WHERE o.event_id = h.event_id);

CREATE TABLE IF NOT EXISTS "public"."outbox_event_archive" (
    event_id           text        NOT NULL,
    aggregate_type     text        NOT NULL,
    aggregate_id       text        NOT NULL,
    aggregate_version  bigint      NOT NULL,
    event_type         text        NOT NULL,
    event_version      int         NOT NULL,
    destination        text        NOT NULL,
    message_key        text        NOT NULL,
    payload            json        NOT NULL,
    headers            json        NULL,
    created_at         timestamptz NOT NULL,
    txid               xid8        NOT NULL,
    seq                bigint      NOT NULL,
    shard              smallint    NOT NULL,
    state              text        NOT NULL CHECK (state IN ('PASSED', 'DEAD')),
    attempts           int         NULL,
    last_error_code    text        NULL,
    last_error_message text        NULL,
    archived_at        timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS "outbox_event_archive_event_idx" ON "public"."outbox_event_archive" (event_id);

CREATE TABLE IF NOT EXISTS "public"."outbox_event_archive_runs" (
    run_id               bigserial   PRIMARY KEY,
    policy               text        NOT NULL,
    mode                 text        NOT NULL,
    started_at           timestamptz NOT NULL,
    finished_at          timestamptz NOT NULL DEFAULT now(),
    sent_moved           bigint      NOT NULL DEFAULT 0,
    dead_moved           bigint      NOT NULL DEFAULT 0,
    consumer_log_trimmed bigint      NOT NULL DEFAULT 0,
    error                text        NULL
);

CREATE INDEX IF NOT EXISTS "outbox_event_archive_run_policy_idx" ON "public"."outbox_event_archive_runs" (policy, started_at DESC);

CREATE INDEX IF NOT EXISTS "outbox_event_hold_dead" ON "public"."outbox_event_hold" (updated_at) WHERE state = 'DEAD';
