-- match, v2: DEAD hold rows, a selector with every filter set
SELECT event_id FROM "public"."outbox_event_hold" WHERE state = $1 AND event_id = ANY($2) AND event_type = $3 AND aggregate_type = $4 AND aggregate_id = $5 AND last_error_code = $6 AND destination = $7 AND created_at >= $8 AND created_at < $9 ORDER BY aggregate_type, aggregate_id, aggregate_version LIMIT $10
