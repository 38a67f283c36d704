-- Read of a v2 table: the newest batch log row that published an event
SELECT (SELECT at FROM "public"."outbox_event_batch"
        WHERE cardinality(offsets) > 0 ORDER BY batch DESC LIMIT 1)
