package inbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/redact"
)

// Replay request statuses (ReplayTable.status).
const (
	ReplayRequested = "REQUESTED" // recorded, no consumer has taken it yet
	ReplayRunning   = "RUNNING"   // a consumer of the group is replaying (heartbeat_at moves)
	ReplayDone      = "DONE"
	ReplayFailed    = "FAILED" // the consumer stopped on a database fault; error says which
)

// ReplayRequest is a recorded replay and how many parked messages it took.
type ReplayRequest struct {
	ID       int64
	Selected int
}

// RequestReplay records a replay of consumer group `group`'s parked messages that
// match sel (at most o.Limit, oldest first) and tags them; a running Consumer of that
// group (Run) takes the request within Options.ReplayPoll and replays them with its
// own handler, at o.Rate. This is how a replay is started from outside the
// application, e.g. by a DeadLetterReplay Job. Follow it with ReplayStatus.
func RequestReplay(ctx context.Context, db *sql.DB, schemaName, group string, sel ReplaySelector, o ReplayOptions) (ReplayRequest, error) {
	s, err := New(db, schemaName, group)
	if err != nil {
		return ReplayRequest{}, err
	}
	if err := o.check(sel); err != nil {
		return ReplayRequest{}, err
	}
	return s.requestReplay(ctx, sel, o, ReplayRequested)
}

// requestReplay inserts the replay row and tags the selected parked rows with its id,
// in one transaction.
func (s *Store) requestReplay(ctx context.Context, sel ReplaySelector, o ReplayOptions, status string) (ReplayRequest, error) {
	sj, err := json.Marshal(sel)
	if err != nil {
		return ReplayRequest{}, fmt.Errorf("inbox: encode selector: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return ReplayRequest{}, storeErr("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	var req ReplayRequest
	err = tx.QueryRowContext(ctx, `INSERT INTO `+s.replays+`
    (consumer_group, requested_by, request_key, reason, selector, status, rate, started_at, heartbeat_at)
VALUES ($1, $2, NULLIF($3, ''), $4, $5, $6, $7, CASE WHEN $6 = 'RUNNING' THEN now() END, CASE WHEN $6 = 'RUNNING' THEN now() END)
ON CONFLICT (consumer_group, request_key) WHERE request_key IS NOT NULL DO NOTHING
RETURNING replay_id`, s.group, redact.Truncate(o.RequestedBy, 200), o.Key, redact.Truncate(o.Reason, maxErrorMessage),
		sj, status, o.Rate).Scan(&req.ID)
	switch {
	case errors.Is(err, sql.ErrNoRows): // the key's request exists: return it as it is
		st, _, err := s.findReplay(ctx, o.Key)
		return ReplayRequest{ID: st.ReplayID, Selected: st.Selected}, err
	case err != nil:
		return req, storeErr("record replay: %w", err)
	}
	if err := tx.QueryRowContext(ctx, tagSQL(s.parked, s.replays), s.group, req.ID, pq.Array(sel.EventIDs), sel.EventType,
		sel.ErrorCode, nullTime(sel.Since), nullTime(sel.Until), o.Limit).Scan(&req.Selected); err != nil {
		return req, storeErr("select parked messages: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return req, storeErr("commit replay request: %w", err)
	}
	return req, nil
}

// tagSQL tags up to $8 matching PARKED rows with replay $2 and records how many.
func tagSQL(parked, replays string) string {
	return `WITH picked AS (
    SELECT topic, kafka_partition, kafka_offset FROM ` + parked + `
    WHERE consumer_group = $1 AND status = 'PARKED'
      AND (COALESCE(cardinality($3::text[]), 0) = 0 OR event_id = ANY($3))
      AND ($4 = '' OR event_type = $4) AND ($5 = '' OR error_code = $5)
      AND ($6::timestamptz IS NULL OR first_seen_at >= $6) AND ($7::timestamptz IS NULL OR first_seen_at < $7)
    ORDER BY topic, kafka_partition, kafka_offset LIMIT $8
), tagged AS (
    UPDATE ` + parked + ` p SET replay_id = $2 FROM picked
    WHERE p.consumer_group = $1 AND (p.topic, p.kafka_partition, p.kafka_offset) = (picked.topic, picked.kafka_partition, picked.kafka_offset)
    RETURNING 1
), counted AS (
    UPDATE ` + replays + ` SET selected = (SELECT count(*) FROM tagged) WHERE replay_id = $2 RETURNING selected
)
SELECT selected FROM counted`
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// ReplayState is a replay as ReplayTable has it.
type ReplayState struct {
	ReplayResult
	Status string // REQUESTED, RUNNING, DONE or FAILED
	Error  string
}

// FindReplay returns the replay request of consumer group `group` recorded with
// ReplayOptions.Key == key (found false when there is none).
func FindReplay(ctx context.Context, db *sql.DB, schemaName, group, key string) (ReplayState, bool, error) {
	s, err := New(db, schemaName, group)
	if err != nil {
		return ReplayState{}, false, err
	}
	return s.findReplay(ctx, key)
}

func (s *Store) findReplay(ctx context.Context, key string) (ReplayState, bool, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, `SELECT replay_id FROM `+s.replays+` WHERE consumer_group = $1 AND request_key = $2`,
		s.group, key).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ReplayState{}, false, nil
	case err != nil:
		return ReplayState{}, false, fmt.Errorf("inbox: find replay %q: %w", key, err)
	}
	st, err := s.replayStatus(ctx, id)
	return st, err == nil, err
}

// ReplayStatus reads replay id of consumer group `group`.
func ReplayStatus(ctx context.Context, db *sql.DB, schemaName, group string, id int64) (ReplayState, error) {
	s, err := New(db, schemaName, group)
	if err != nil {
		return ReplayState{}, err
	}
	return s.replayStatus(ctx, id)
}

func (s *Store) replayStatus(ctx context.Context, id int64) (ReplayState, error) {
	st := ReplayState{ReplayResult: ReplayResult{ReplayID: id}}
	var errText sql.NullString
	err := s.db.QueryRowContext(ctx, `SELECT status, selected, applied, duplicates, failed, error FROM `+s.replays+
		` WHERE consumer_group = $1 AND replay_id = $2`, s.group, id).Scan(&st.Status, &st.Selected, &st.Applied, &st.Duplicates, &st.Failed, &errText)
	if err != nil {
		return st, fmt.Errorf("inbox: read replay %d: %w", id, err)
	}
	st.Error = errText.String
	return st, nil
}

func (s *Store) replayProgress(ctx context.Context, r ReplayResult) error {
	_, err := s.db.ExecContext(ctx, `UPDATE `+s.replays+` SET heartbeat_at = now(), applied = $2, duplicates = $3, failed = $4
WHERE replay_id = $1`, r.ReplayID, r.Applied, r.Duplicates, r.Failed)
	if err != nil {
		return storeErr("record progress of replay %d: %w", r.ReplayID, err)
	}
	return nil
}

// handBackReplay returns a replay stopped by its context (a consumer shutting down)
// to REQUESTED with its counts so far, so another consumer of the group takes it at
// once; the rows already replayed are REPLAYED and are not selected again. It
// returns the context's error.
func (s *Store) handBackReplay(ctx context.Context, r ReplayResult) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if _, err := s.db.ExecContext(rctx, `UPDATE `+s.replays+` SET status = 'REQUESTED', heartbeat_at = NULL,
applied = $2, duplicates = $3, failed = $4 WHERE replay_id = $1`, r.ReplayID, r.Applied, r.Duplicates, r.Failed); err != nil {
		return fmt.Errorf("inbox: hand back replay %d: %w (another consumer takes it over after its ReplayLease without a heartbeat)", r.ReplayID, err)
	}
	return ctx.Err()
}

// endReplay records the end of a replay (DONE, or FAILED with runErr) and returns
// runErr, or the recording's error. It records even when ctx has ended.
func (s *Store) endReplay(ctx context.Context, r ReplayResult, runErr error) error {
	status, errText := ReplayDone, sql.NullString{}
	if runErr != nil {
		status, errText = ReplayFailed, sql.NullString{String: redact.Truncate(runErr.Error(), maxErrorMessage), Valid: true}
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	_, err := s.db.ExecContext(rctx, `UPDATE `+s.replays+` SET status = $2, finished_at = now(), heartbeat_at = now(),
applied = $3, duplicates = $4, failed = $5, error = $6 WHERE replay_id = $1`,
		r.ReplayID, status, r.Applied, r.Duplicates, r.Failed, errText)
	if runErr != nil {
		return runErr
	}
	if err != nil {
		return fmt.Errorf("inbox: record the end of replay %d: %w", r.ReplayID, err)
	}
	return nil
}
