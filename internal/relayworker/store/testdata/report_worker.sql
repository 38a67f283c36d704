-- ReportWorker: $1 worker id, $2 broker up, $3 broker error code
INSERT INTO "public"."outbox_event_workers" AS w
    (worker_id, broker_up, broker_down_since, broker_error_code)
VALUES ($1, $2, CASE WHEN $2 THEN NULL ELSE now() END, NULLIF($3, ''))
ON CONFLICT (worker_id) DO UPDATE SET
    broker_up = EXCLUDED.broker_up,
    broker_down_since = CASE WHEN EXCLUDED.broker_up THEN NULL ELSE COALESCE(w.broker_down_since, now()) END,
    broker_error_code = EXCLUDED.broker_error_code,
    heartbeat_at = now()
