package config

import (
	"strings"
	"testing"
)

func TestArchiveFlagValidation(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	for _, args := range [][]string{
		{"--dsn", "x", "--mode", "truncate"},
		{"--dsn", "x", "--sent-retention", "5m"},
		{"--dsn", "x", "--dead-retention", "1h"},
		{"--dsn", "x", "--batch-size", "0"},
		{"--dsn", "x", "--table", "Bad-Name"},
		{"--dsn", "x", "--policy", strings.Repeat("n", 254)},
		{"--mode", "archive"},
	} {
		if _, err := ParseArchive(args, env); err == nil {
			t.Errorf("ParseArchive(%v) accepted bad input", args)
		}
	}
}
