-- insertRun: the run's row
INSERT INTO "public"."outbox_event_archive_runs"
    (policy, mode, started_at, finished_at, sent_moved, dead_moved, consumer_log_trimmed, error)
VALUES ($1, $2, now() - make_interval(secs => $3), now(), $4, $5, $6, $7)
