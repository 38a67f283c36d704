-- runV2, archive mode: DEAD hold rows by updated_at
WITH v AS (SELECT event_id FROM "public"."outbox_event_hold" WHERE state = 'DEAD' AND updated_at < now() - make_interval(secs => $1) ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED),
moved AS (DELETE FROM "public"."outbox_event_hold" h USING v WHERE h.event_id = v.event_id AND h.state = 'DEAD' RETURNING h.*)
INSERT INTO "public"."outbox_event_archive" (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, event_version, destination, message_key, payload, headers, created_at, txid, seq, shard, state, attempts, last_error_code, last_error_message)
SELECT event_id, aggregate_type, aggregate_id, aggregate_version, event_type, event_version, destination, message_key, payload, headers, created_at, txid, seq, shard, 'DEAD', attempts, last_error_code, last_error_message FROM moved
