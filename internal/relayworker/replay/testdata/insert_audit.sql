-- begin: record a new replay
INSERT INTO "public"."outbox_event_replay_audit" (replay_id, requested_by, reason, selector, dry_run, phase, matched, event_ids)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (replay_id) DO NOTHING
