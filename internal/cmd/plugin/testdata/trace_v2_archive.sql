-- trace of a v2 table: the newest archive row of event $1 and, if PASSED, its batch log row
SELECT s.event_id, s.aggregate_type, s.aggregate_id, s.aggregate_version, s.event_type, s.destination,
       s.message_key, s.created_at, s.shard, s.seq, s.status, s.attempts, s.last_error_code, s.next_attempt_at,
       b.batch, b.owner, b.at, b.kafka_partition, b.kafka_offset, s.archived_at
FROM (SELECT event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key,
             created_at, shard, seq, state AS status, COALESCE(attempts, 0) AS attempts, last_error_code,
             NULL::timestamptz AS next_attempt_at, archived_at
      FROM "public"."outbox_event_archive"
      WHERE event_id = $1
      ORDER BY archived_at DESC
      LIMIT 1) s
LEFT JOIN LATERAL (
    SELECT b.batch, b.owner, b.at, b.partitions[p.i] AS kafka_partition, b.offsets[p.i] AS kafka_offset
    FROM "public"."outbox_event_batch" b
    CROSS JOIN LATERAL (SELECT CASE WHEN s.shard = ANY (b.shards) OR b.shards = '{}' THEN array_position(b.seqs, s.seq) END AS i) p
    WHERE s.status = 'PASSED' AND b.at >= s.created_at AND p.i IS NOT NULL
    ORDER BY b.at
    LIMIT 1
) b ON true
