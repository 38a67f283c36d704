-- handBack, v2: $1 DEAD hold rows back to RETRY, due now, for replay $2
UPDATE "public"."outbox_event_hold"
		SET state = 'RETRY', attempts = 0, next_attempt_at = now(),
		    last_error_code = 'REPLAYED',
		    last_error_message = left('replay ' || $2 || ' after ' || coalesce(last_error_code, '') || ': ' || coalesce(last_error_message, ''), 512),
		    updated_at = now()
		WHERE event_id = ANY($1) AND state = 'DEAD'
