package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// `relayworker <command> -h` prints the command's flags on stdout (exit 0); a flag the
// command does not have is a ConfigError (exit 2).
// inbox-replay reads its DSN from INBOX_DSN only, and says so instead of listing -dsn.
func TestEveryCommandPrintsItsFlags(t *testing.T) {
	for cmd, want := range map[string][]string{
		"migrate": {"-notify-trigger", "-dsn"}, "relay": {"-brokers", "-dsn"}, "replay": {"-replay-id", "-dsn"},
		"archive": {"-sent-retention", "-dsn"},
		"inbox-replay": {"-group", "-schema", "-event-ids", "-event-type", "-error-code", "-parked-after", "-parked-before",
			"-rate", "-limit", "-requested-by", "-reason", "-wait-timeout", "-replay-id", "INBOX_DSN"},
	} {
		var stdout, stderr bytes.Buffer
		err := Run(context.Background(), []string{cmd, "-h"}, noEnv, &stdout, &stderr)
		if !errors.Is(err, ErrHelp) {
			t.Errorf("%s -h: %v, want ErrHelp", cmd, err)
		}
		out := stdout.String()
		if !strings.HasPrefix(out, "usage: relayworker "+cmd+" [flags]\n") {
			t.Errorf("%s -h printed %q, want its usage", cmd, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s -h printed %q, want %s in it", cmd, out, w)
			}
		}
		if cmd == "inbox-replay" && strings.Contains(out, "-dsn") {
			t.Errorf("inbox-replay -h lists a -dsn flag: the DSN must come from INBOX_DSN only")
		}
		var cfgErr *ConfigError
		if err := Run(context.Background(), []string{cmd, "--nope"}, noEnv, &stdout, &stderr); !errors.As(err, &cfgErr) {
			t.Errorf("%s --nope: %v, want a ConfigError", cmd, err)
		}
	}
}

// `relayworker version` prints the build's version (internal/buildinfo) and exits 0.
func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), []string{"version"}, noEnv, &stdout, &stderr); err != nil {
		t.Fatalf("version: %v", err)
	}
	if out := stdout.String(); !strings.HasPrefix(out, "relayworker dev (go") {
		t.Errorf("version printed %q, want \"relayworker dev (go...\" (a test binary has no stamp)", out)
	}
}
