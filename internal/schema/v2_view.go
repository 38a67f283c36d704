// v2_view.go: the per-event status view of a v2 table (docs/contract-v2.md, "As
// built: replay, trace and the status view"). A v2 row carries no status: the view
// derives one from where the shard's cursor stands and the hold table, so operators
// can ask SQL what became of an event.

package schema

import "github.com/outbox-operator/outbox-operator/internal/pgident"

// StatusViewSuffix names the view <table>_status.
const StatusViewSuffix = "_status"

// StatusViewDDL creates (or replaces) <table>_status: one row per event of the outbox
// table, and one per hold row whose outbox row is gone (retention drops outbox rows,
// the hold table keeps DEAD ones). status is, in this order:
//   - the hold row's state (RETRY, DEAD, HELD) when there is one;
//   - SENT when the row is visible in the snapshot of its shard's lo_tick (an earlier,
//     advanced window; a row that went to the hold table and was sent from it has no
//     hold row any more), or, while the shard's window is read in parts, visible in
//     hi_tick's snapshot at or below pos (the window is read in seq order);
//   - PENDING otherwise: committed, in the shard's open window.
//
// attempts, last_error_code and next_attempt_at are the hold row's (0 and NULL
// without one). Never the payload or the error message: the view is for operators'
// queries and dashboards, which must not show event contents. A lookup by event_id or
// by aggregate uses the table's indexes; a filter on status reads the whole table
// (the operator's status counts pending events by the shards' windows instead).
func StatusViewDDL(t pgident.Table) string {
	q := t.Qualified()
	hold := t.WithSuffix(HoldSuffix).Qualified()
	return `CREATE OR REPLACE VIEW ` + t.WithSuffix(StatusViewSuffix).Qualified() + ` AS
SELECT o.event_id, o.aggregate_type, o.aggregate_id, o.aggregate_version, o.event_type, o.destination,
       o.message_key, o.created_at, o.shard, o.seq,
       CASE WHEN h.state IS NOT NULL THEN h.state
            WHEN pg_visible_in_snapshot(o.txid, lo.snap)
              OR (s.hi_tick IS NOT NULL AND o.seq <= s.pos AND pg_visible_in_snapshot(o.txid, hi.snap)) THEN '` + StatusSent + `'
            ELSE '` + StatusPending + `' END AS status,
       COALESCE(h.attempts, 0) AS attempts, h.last_error_code, h.next_attempt_at
FROM ` + q + ` o
JOIN ` + t.WithSuffix(ShardSuffix).Qualified() + ` s ON s.shard = o.shard
JOIN ` + t.WithSuffix(TickSuffix).Qualified() + ` lo ON lo.tick = s.lo_tick
LEFT JOIN ` + t.WithSuffix(TickSuffix).Qualified() + ` hi ON hi.tick = s.hi_tick
LEFT JOIN ` + hold + ` h ON h.event_id = o.event_id
UNION ALL
SELECT h.event_id, h.aggregate_type, h.aggregate_id, h.aggregate_version, h.event_type, h.destination,
       h.message_key, h.created_at, h.shard, h.seq, h.state, h.attempts, h.last_error_code, h.next_attempt_at
FROM ` + hold + ` h
WHERE NOT EXISTS (SELECT FROM ` + q + ` o WHERE o.event_id = h.event_id)`
}
