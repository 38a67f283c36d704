package main_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relayproc"
)

// child is a running relayworker process.
type child = relayproc.Proc

// spawn starts relayworker with exactly env and args; the process is killed at test
// end if still running.
func spawn(t *testing.T, env []string, args ...string) *child {
	t.Helper()
	return relayproc.Spawn(t, bin, env, args...)
}

// httpGet returns status code and body; code 0 when the request failed.
func httpGet(url string) (int, string) { return relayproc.HTTPGet(url) }

// rowState is the relay-visible state of one outbox row.
type rowState struct {
	status, code, msg string
	retries           int
	// delay is next_retry_at - updated_at: the backoff the relay stored with its mark.
	delay time.Duration
}

func stateOf(t *testing.T, db *sql.DB, id string) rowState {
	t.Helper()
	var s rowState
	var code, msg sql.NullString
	var ms float64
	err := db.QueryRow(`SELECT status, last_error_code, last_error_message, retry_count,
		EXTRACT(EPOCH FROM next_retry_at - updated_at) * 1000
		FROM public.outbox_event WHERE event_id = $1`, id).Scan(&s.status, &code, &msg, &s.retries, &ms)
	if err != nil {
		t.Fatal(err)
	}
	s.code, s.msg, s.delay = code.String, msg.String, time.Duration(ms*float64(time.Millisecond))
	return s
}
