-- handBack: $1 ids back to PENDING for replay $2
UPDATE "public"."outbox_event"
		SET status = 'PENDING', retry_count = 0, next_retry_at = now(), owner_token = NULL, lease_until = NULL,
		    last_error_code = 'REPLAYED',
		    last_error_message = left('replay ' || $2 || ' after ' || coalesce(last_error_code, '') || ': ' || coalesce(last_error_message, ''), 512),
		    updated_at = now()
		WHERE event_id = ANY($1) AND status = 'DEAD'
