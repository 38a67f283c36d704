-- begin: the audit row of replay $1
SELECT phase, event_ids, matched, replayed, succeeded, dead_again FROM "public"."outbox_event_replay_audit" WHERE replay_id = $1
