package inbox

// The statements of the claim: dedup rows, version guard and hash check in one round
// trip (claim.go runs them).

// claimSQL is steps 1 to 3 of Handle for a whole batch in one round trip: insert the
// dedup rows first (ON CONFLICT DO NOTHING under the primary key), read what an
// existing row says, and advance each aggregate's last applied version to the
// batch's newest. The lookups are correlated subqueries, so each is one primary-key
// probe whatever plan the prepared statement settles on (a generic plan that joins
// the whole dedup table costs milliseconds per message). The final SELECT runs on
// the statement's snapshot: it sees the rows
// that existed before (a duplicate's hash, the previous version), not the ones this
// statement inserts. Versions are upserted in key order so two consumers that share
// aggregates (during a rebalance) lock them in the same order and cannot deadlock.
func claimSQL(consume, version string) string {
	return `WITH input AS (
    SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[]) WITH ORDINALITY
        AS i(event_id, event_type, request_hash, aggregate_type, aggregate_id, aggregate_version, ord)
), ins AS (
    INSERT INTO ` + consume + ` (consumer_group, event_id, event_type, request_hash, status)
    SELECT $1, event_id, event_type, request_hash, 'SUCCESS' FROM input ORDER BY ord
    ON CONFLICT (consumer_group, event_id) DO NOTHING
    RETURNING event_id
), up AS (
    INSERT INTO ` + version + ` AS v (consumer_group, aggregate_type, aggregate_id, last_version)
    SELECT $1, i.aggregate_type, i.aggregate_id, max(i.aggregate_version)
    FROM input i JOIN ins USING (event_id) WHERE i.aggregate_id <> ''
    GROUP BY i.aggregate_type, i.aggregate_id ORDER BY i.aggregate_type, i.aggregate_id
    ON CONFLICT (consumer_group, aggregate_type, aggregate_id)
    DO UPDATE SET last_version = EXCLUDED.last_version, updated_at = now()
    WHERE v.last_version < EXCLUDED.last_version
    RETURNING aggregate_type, aggregate_id
)
SELECT i.ord,
       i.event_id IN (SELECT event_id FROM ins),
       (SELECT c.request_hash FROM ` + consume + ` c WHERE c.consumer_group = $1 AND c.event_id = i.event_id),
       (SELECT p.last_version FROM ` + version + ` p
         WHERE p.consumer_group = $1 AND p.aggregate_type = i.aggregate_type AND p.aggregate_id = i.aggregate_id),
       (i.aggregate_type, i.aggregate_id) IN (SELECT aggregate_type, aggregate_id FROM up)
FROM input i
ORDER BY i.ord`
}

// finishSQL records what the handlers returned and which rows were stale, for the
// rows that need it (most need nothing: the dedup row went in as SUCCESS).
func finishSQL(consume string) string {
	return `UPDATE ` + consume + ` c
SET status = CASE WHEN u.stale THEN 'STALE' ELSE c.status END, result_ref = NULLIF(u.ref, ''), updated_at = now()
FROM unnest($2::text[], $3::bool[], $4::text[]) AS u(event_id, stale, ref)
WHERE c.consumer_group = $1 AND c.event_id = u.event_id`
}

// claimOneSQL is claimSQL for a single message.
func claimOneSQL(consume, version string) string {
	return `WITH ins AS (
    INSERT INTO ` + consume + ` (consumer_group, event_id, event_type, request_hash, status)
    VALUES ($1, $2, $3, $4, 'SUCCESS')
    ON CONFLICT (consumer_group, event_id) DO NOTHING
    RETURNING 1
), up AS (
    INSERT INTO ` + version + ` AS v (consumer_group, aggregate_type, aggregate_id, last_version)
    SELECT $1, $5, $6, $7 WHERE $6 <> '' AND EXISTS (SELECT 1 FROM ins)
    ON CONFLICT (consumer_group, aggregate_type, aggregate_id)
    DO UPDATE SET last_version = EXCLUDED.last_version, updated_at = now()
    WHERE v.last_version < EXCLUDED.last_version
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM ins),
       (SELECT c.request_hash FROM ` + consume + ` c WHERE c.consumer_group = $1 AND c.event_id = $2),
       (SELECT p.last_version FROM ` + version + ` p
         WHERE p.consumer_group = $1 AND p.aggregate_type = $5 AND p.aggregate_id = $6),
       EXISTS (SELECT 1 FROM up)`
}
