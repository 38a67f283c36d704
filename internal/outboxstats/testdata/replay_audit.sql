-- ReadReplayAudit: the audit row of replay $1
SELECT phase, matched, replayed, succeeded, dead_again FROM "public"."outbox_event_replay_audit" WHERE replay_id = $1
