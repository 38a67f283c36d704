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
func TestEveryCommandPrintsItsFlags(t *testing.T) {
	for cmd, flag := range map[string]string{
		"migrate": "-notify-trigger", "relay": "-brokers", "replay": "-replay-id", "archive": "-sent-retention",
	} {
		var stdout, stderr bytes.Buffer
		err := Run(context.Background(), []string{cmd, "-h"}, noEnv, &stdout, &stderr)
		if !errors.Is(err, ErrHelp) {
			t.Errorf("%s -h: %v, want ErrHelp", cmd, err)
		}
		out := stdout.String()
		if !strings.HasPrefix(out, "usage: relayworker "+cmd+" [flags]\n") || !strings.Contains(out, flag) || !strings.Contains(out, "-dsn") {
			t.Errorf("%s -h printed %q, want its usage with %s and -dsn", cmd, out, flag)
		}
		var cfgErr *ConfigError
		if err := Run(context.Background(), []string{cmd, "--nope"}, noEnv, &stdout, &stderr); !errors.As(err, &cfgErr) {
			t.Errorf("%s --nope: %v, want a ConfigError", cmd, err)
		}
	}
}
