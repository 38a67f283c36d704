-- handBack: record how far replay $1 got, in the same transaction
UPDATE "public"."outbox_event_replay_audit" SET replayed = $2 WHERE replay_id = $1
