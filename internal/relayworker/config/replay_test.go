package config

import "testing"

func noEnv(string) (string, bool) { return "", false }

func TestReplayFlagValidation(t *testing.T) {
	base := []string{"--dsn", "x", "--replay-id", "r", "--reason", "fixed it"}
	for _, extra := range [][]string{
		{},                       // empty selector
		{"--aggregate-id", "o1"}, // id without type
		{"--event-type", "T", "--rate", "0"},
		{"--event-type", "T", "--max-new-dead-percent", "101"},
		{"--event-type", "T", "--created-after", "yesterday"},
		{"--event-ids", "a,,b"},
		{"--event-type", "T", "--created-after", "2026-02-01T00:00:00Z", "--created-before", "2026-01-01T00:00:00Z"},
	} {
		if _, err := ParseReplay(append(append([]string{}, base...), extra...), noEnv); err == nil {
			t.Errorf("ParseReplay(%v) accepted bad input", extra)
		}
	}
	if _, err := ParseReplay([]string{"--dsn", "x", "--replay-id", "r", "--event-type", "T"}, noEnv); err == nil {
		t.Error("missing reason accepted")
	}
}
