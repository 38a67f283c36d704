-- ReadLastArchiveRun: the newest run of policy $1
SELECT mode, started_at, finished_at, sent_moved, dead_moved, consumer_log_trimmed, error
FROM "public"."outbox_event_archive_runs" WHERE policy = $1 ORDER BY started_at DESC, run_id DESC LIMIT 1
