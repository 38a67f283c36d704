// Package cli wires the relayworker subcommands (docs/worker-contract.md): a table of
// commands, one file each, that parse their flags and environment (internal/relayworker/config),
// map them to the work packages' Options (options.go), open the connections and run.
// cmd/relayworker only maps the returned error to an exit code.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/outbox-operator/outbox-operator/internal/buildinfo"
	"github.com/outbox-operator/outbox-operator/internal/relayworker/config"
)

// ConfigError means bad flags or environment: exit code 2.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// ErrHelp is returned after usage was printed on request (exit 0).
var ErrHelp = errors.New("help requested")

// command is one subcommand. parse reads its flags and environment and returns what
// to run; its errors are flag errors (exit 2, or 0 after -h), whatever the runner
// returns is the command's own.
type command struct {
	name    string
	summary string
	parse   func(args []string, getenv config.Getenv) (runner, error)
}

// runner runs a parsed command; it logs to stderr.
type runner func(ctx context.Context, stderr io.Writer) error

// commands in the order the usage lists them.
var commands = []command{migrateCommand, relayCommand, replayCommand, archiveCommand, inboxReplayCommand}

// Run executes the subcommand in args (without the program name).
func Run(ctx context.Context, args []string, getenv config.Getenv, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return &ConfigError{fmt.Errorf("missing command (%s)", strings.Join(names(), ", "))}
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage())
		return ErrHelp
	case "version", "--version":
		fmt.Fprintf(stdout, "relayworker %s (%s)\n", buildinfo.Version(), buildinfo.Platform())
		return nil
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		run, err := c.parse(args[1:], getenv)
		if err != nil {
			return flagErr(c.name, err, stdout)
		}
		return run(ctx, stderr)
	}
	n := names()
	return &ConfigError{fmt.Errorf("unknown command %q (want %s or %s)", args[0], strings.Join(n[:len(n)-1], ", "), n[len(n)-1])}
}

func names() []string {
	n := make([]string, len(commands))
	for i, c := range commands {
		n[i] = c.name
	}
	return n
}

func usage() string {
	var b strings.Builder
	b.WriteString("usage: relayworker <command> [flags]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-14s%s\n", c.name, c.summary)
	}
	b.WriteString(`
Every flag also reads an environment variable; see docs/worker-contract.md.
Run 'relayworker <command> -h' for the flags of a command, 'relayworker version' for the version.
`)
	return b.String()
}

// flagErr prints the command's flags after -h (exit 0) and turns anything else into
// a ConfigError naming the command (exit 2).
func flagErr(cmd string, err error, stdout io.Writer) error {
	if errors.Is(err, config.ErrHelp) {
		fmt.Fprintf(stdout, "usage: relayworker %s [flags]\n%s", cmd, config.Usage(cmd))
		return ErrHelp
	}
	return &ConfigError{fmt.Errorf("%s: %w", cmd, err)}
}
