-- Tick, 1st statement: $1 the tick lock's key; returns seq_before
SELECT COALESCE(pg_sequence_last_value('"public"."outbox_event_seq"'), 0) FROM pg_advisory_xact_lock(hashtext($1))
