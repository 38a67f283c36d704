-- insertRun: the policy's runs older than the newest ArchiveRunsKept
DELETE FROM "public"."outbox_event_archive_runs" WHERE policy = $1 AND (started_at, run_id) < (
    SELECT started_at, run_id FROM "public"."outbox_event_archive_runs" WHERE policy = $1
    ORDER BY started_at DESC, run_id DESC OFFSET $2 LIMIT 1)
