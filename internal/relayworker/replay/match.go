// match.go: which DEAD rows a replay takes, chosen once at its start.

package replay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// Selector chooses DEAD rows; empty fields do not filter. Its JSON is the selector
// recorded in <table>_replay_audit.
type Selector struct {
	EventIDs      []string   `json:"eventIds,omitempty"`
	EventType     string     `json:"eventType,omitempty"`
	AggregateType string     `json:"aggregateType,omitempty"`
	AggregateID   string     `json:"aggregateId,omitempty"`
	ErrorCode     string     `json:"errorCode,omitempty"`
	Destination   string     `json:"destination,omitempty"`
	CreatedAfter  *time.Time `json:"createdAfter,omitempty"`
	CreatedBefore *time.Time `json:"createdBefore,omitempty"`
}

// where returns the selector's conditions, numbering their parameters after args,
// and args with the values appended.
func (s Selector) where(args []any) ([]string, []any) {
	var where []string
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if len(s.EventIDs) > 0 {
		add("event_id = ANY($%d)", pq.Array(s.EventIDs))
	}
	for _, f := range []struct{ col, v string }{
		{"event_type", s.EventType}, {"aggregate_type", s.AggregateType}, {"aggregate_id", s.AggregateID},
		{"last_error_code", s.ErrorCode}, {"destination", s.Destination},
	} {
		if f.v != "" {
			add(f.col+" = $%d", f.v)
		}
	}
	if s.CreatedAfter != nil {
		add("created_at >= $%d", *s.CreatedAfter)
	}
	if s.CreatedBefore != nil {
		add("created_at < $%d", *s.CreatedBefore)
	}
	return where, args
}

// matchSQL selects the DEAD rows sel matches, at most limit, with its arguments.
func matchSQL(st statements, sel Selector, limit int) (string, []any) {
	where, args := sel.where([]any{schema.StatusDead})
	args = append(args, limit)
	q := `SELECT event_id FROM ` + st.deadFrom + ` WHERE ` + st.stateCol + ` = $1`
	if len(where) > 0 {
		q += ` AND ` + strings.Join(where, " AND ")
	}
	q += fmt.Sprintf(` ORDER BY aggregate_type, aggregate_id, aggregate_version LIMIT $%d`, len(args))
	return q, args
}

// match selects the DEAD rows once, in per-aggregate version order.
func (r *Replayer) match(ctx context.Context) ([]string, error) {
	q, args := matchSQL(r.sql, r.Opts.Selector, r.Opts.MaxEvents+1)
	rows, err := r.DB.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("select DEAD events: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("select DEAD events: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select DEAD events: %w", err)
	}
	if len(ids) > r.Opts.MaxEvents {
		return nil, fmt.Errorf("selector matches more than %d DEAD events; narrow it or raise --max-events", r.Opts.MaxEvents)
	}
	return ids, nil
}
