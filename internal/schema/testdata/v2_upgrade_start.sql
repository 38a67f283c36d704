-- upgradeStartStatements: the v1 table public.outbox_event to 32 shards, with its NOTIFY trigger (v2_migrate.sql's statements in the middle left out), separated by ;
SET LOCAL lock_timeout = '5000ms';

LOCK TABLE "public"."outbox_event" IN ACCESS EXCLUSIVE MODE;

ALTER TABLE "public"."outbox_event" RENAME TO "outbox_event_v1";

ALTER INDEX IF EXISTS "public"."outbox_event_pkey" RENAME TO "outbox_event_v1_pkey";

ALTER TABLE IF EXISTS "public"."outbox_event_archive" RENAME TO "outbox_event_v1_archive";

ALTER INDEX IF EXISTS "public"."outbox_event_archive_event_idx" RENAME TO "outbox_event_v1_archive_event_idx";

-- V2Statements (v2_migrate.sql);

CREATE TABLE IF NOT EXISTS "public"."outbox_event_upgrade" (
    one         boolean     PRIMARY KEY DEFAULT true CHECK (one),
    from_table  text        NOT NULL,
    state       text        NOT NULL CHECK (state IN ('copying', 'done')),
    last_event_id text      NOT NULL DEFAULT '',
    copied      bigint      NOT NULL DEFAULT 0,
    dead        bigint      NOT NULL DEFAULT 0,
    started_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz NULL
);

INSERT INTO "public"."outbox_event_upgrade" (from_table, state) VALUES ('public.outbox_event_v1', 'copying')
ON CONFLICT (one) DO UPDATE SET from_table = EXCLUDED.from_table, state = EXCLUDED.state, last_event_id = '', copied = 0, dead = 0,
    started_at = now(), updated_at = now(), finished_at = NULL;

CREATE OR REPLACE FUNCTION "public"."outbox_event_notify"() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify('outbox_event', '');
    RETURN NULL;
END
$fn$;

DROP TRIGGER IF EXISTS "outbox_event_notify_trg" ON "public"."outbox_event";

CREATE TRIGGER "outbox_event_notify_trg" AFTER INSERT ON "public"."outbox_event" FOR EACH STATEMENT EXECUTE FUNCTION "public"."outbox_event_notify"();
