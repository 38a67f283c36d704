-- finish: the final phase and counts
UPDATE "public"."outbox_event_replay_audit"
		SET phase = $2, replayed = $3, succeeded = $4, dead_again = $5, finished_at = now() WHERE replay_id = $1
