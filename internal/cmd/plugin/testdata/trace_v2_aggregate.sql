-- trace --aggregate of a v2 table: the status view's rows of the newest $3 versions of aggregate $1/$2, each with its batch log row once SENT
SELECT s.event_id, s.aggregate_type, s.aggregate_id, s.aggregate_version, s.event_type, s.destination,
       s.message_key, s.created_at, s.shard, s.seq, s.status, s.attempts, s.last_error_code, s.next_attempt_at,
       b.batch, b.owner, b.at, b.kafka_partition, b.kafka_offset
FROM (SELECT * FROM "public"."outbox_event_status"
      WHERE aggregate_type = $1 AND aggregate_id = $2 ORDER BY aggregate_version DESC LIMIT $3) s
LEFT JOIN LATERAL (
    SELECT b.batch, b.owner, b.at, b.partitions[p.i] AS kafka_partition, b.offsets[p.i] AS kafka_offset
    FROM "public"."outbox_event_batch" b
    CROSS JOIN LATERAL (SELECT CASE WHEN s.shard = ANY (b.shards) OR b.shards = '{}' THEN array_position(b.seqs, s.seq) END AS i) p
    WHERE s.status = 'SENT' AND b.at >= s.created_at AND p.i IS NOT NULL
    ORDER BY b.at
    LIMIT 1
) b ON true
ORDER BY s.aggregate_version
