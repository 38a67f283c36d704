package plugin

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// auditEntry is one <table>_replay_audit row that mentions an event: the replay
// selected it (event_ids), or named it in its selector.
type auditEntry struct {
	ReplayID, RequestedBy, Reason, Phase    string
	DryRun                                  bool
	Matched, Replayed, Succeeded, DeadAgain int64
	StartedAt                               time.Time
	FinishedAt                              sql.NullTime
}

// auditLimit keeps a trace short for an event replayed over and over.
const auditLimit = 20

// replayAudits lists the newest audit rows mentioning id. event_ids is a JSON array of
// the selected ids (written by `relayworker replay`); `?` tests array membership.
// The audit table is small (one row per replay), so a scan is fine.
func replayAudits(ctx context.Context, tx *sql.Tx, t pgident.Table, id string) ([]auditEntry, error) {
	at := t.WithSuffix(schema.ReplayAuditSuffix)
	ok, err := exists(ctx, tx, at)
	if err != nil || !ok {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT replay_id, requested_by, reason, phase, dry_run, matched, replayed,
		succeeded, dead_again, started_at, finished_at FROM `+at.Qualified()+`
		WHERE coalesce(event_ids, '[]'::jsonb) ? $1 OR coalesce(selector->'eventIds', '[]'::jsonb) ? $1
		ORDER BY started_at DESC LIMIT $2`, id, auditLimit)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", at, err)
	}
	defer rows.Close()
	var out []auditEntry
	for rows.Next() {
		var a auditEntry
		if err := rows.Scan(&a.ReplayID, &a.RequestedBy, &a.Reason, &a.Phase, &a.DryRun, &a.Matched, &a.Replayed,
			&a.Succeeded, &a.DeadAgain, &a.StartedAt, &a.FinishedAt); err != nil {
			return nil, fmt.Errorf("read %s: %w", at, err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
