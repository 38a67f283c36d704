package config

import (
	"strings"
	"testing"
	"time"
)

func inboxEnv(kv ...string) Getenv {
	m := map[string]string{"INBOX_DSN": "postgres://consumer@db/app"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestInboxReplayParsesFlagsAndEnv(t *testing.T) {
	r, err := ParseInboxReplay([]string{"--group=billing", "--schema=app", "--reason=INC-7 fixed", "--rate=0.5",
		"--event-ids=a, b", "--parked-after=2026-01-01T00:00:00Z"}, inboxEnv("REPLAY_LIMIT", "20", "REPLAY_ERROR_CODE", "permanent"))
	if err != nil {
		t.Fatal(err)
	}
	after := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if r.DSN != "postgres://consumer@db/app" || r.Group != "billing" || r.Schema != "app" || r.Rate != 0.5 || r.Limit != 20 ||
		strings.Join(r.Selector.EventIDs, ",") != "a,b" || r.Selector.ErrorCode != "permanent" || !r.Selector.ParkedAfter.Equal(after) ||
		r.RequestedBy != "unknown" || r.WaitTimeout != 30*time.Minute {
		t.Errorf("parsed %+v", r)
	}
}

func TestInboxReplayFlagValidation(t *testing.T) {
	base := []string{"--group=g", "--reason=fixed it", "--event-type=T"}
	for name, c := range map[string]struct {
		args []string
		env  Getenv
		want string
	}{
		"no dsn":        {base, noEnv, "INBOX_DSN"},
		"dsn as a flag": {append([]string{"--dsn=postgres://x"}, base...), inboxEnv(), "flag provided but not defined"},
		"no group":      {[]string{"--reason=fixed it", "--event-type=T"}, inboxEnv(), "--group"},
		"bad schema":    {append([]string{"--schema=App"}, base...), inboxEnv(), "not a valid identifier"},
		"no reason":     {[]string{"--group=g", "--event-type=T"}, inboxEnv(), "--reason"},
		"empty select":  {[]string{"--group=g", "--reason=fixed it"}, inboxEnv(), "selector is empty"},
		"slow rate":     {append([]string{"--rate=0.05"}, base...), inboxEnv(), "--rate"},
		"big limit":     {append([]string{"--limit=10001"}, base...), inboxEnv(), "--limit"},
		"zero wait":     {append([]string{"--wait-timeout=0s"}, base...), inboxEnv(), "--wait-timeout"},
		"empty id":      {[]string{"--group=g", "--reason=fixed it", "--event-ids=a,,b"}, inboxEnv(), "empty entry"},
		"bad time":      {append([]string{"--parked-before=yesterday"}, base...), inboxEnv(), "RFC 3339"},
		"long key":      {append([]string{"--replay-id=" + strings.Repeat("k", 161)}, base...), inboxEnv(), "--replay-id"},
		"inverted window": {append([]string{"--parked-after=2026-02-01T00:00:00Z", "--parked-before=2026-01-01T00:00:00Z"}, base...),
			inboxEnv(), "--parked-after must be before"},
		"bad rate env": {base, inboxEnv("REPLAY_RATE", "fast"), "REPLAY_RATE"},
	} {
		_, err := ParseInboxReplay(c.args, c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, c.want)
		}
	}
}
