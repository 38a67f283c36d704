// Package config parses and validates the relayworker command line and environment
// (docs/worker-contract.md). It never exits the process: every problem is returned as
// one error whose text names the flag or variable at fault.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/contract"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// ErrHelp is returned when -h/--help was asked for.
var ErrHelp = flag.ErrHelp

// Common holds the flags every subcommand shares.
type Common struct {
	DSN      string
	Schema   string
	Table    string
	Pipeline string
	LogLevel string

	// T is the validated, quotable outbox table.
	T pgident.Table
}

// Getenv looks an environment variable up; os.LookupEnv in production, a map in tests.
type Getenv func(string) (string, bool)

// binder registers a flag whose default comes from an environment variable.
type binder struct {
	fs     *flag.FlagSet
	getenv Getenv
	errs   []error
}

func (b *binder) str(p *string, name, env, def, usage string) {
	if v, ok := b.getenv(env); ok {
		def = v
	}
	b.fs.StringVar(p, name, def, usage+" (env "+env+")")
}

func (b *binder) boolean(p *bool, name, env string, def bool, usage string) {
	if v, ok := b.getenv(env); ok && v != "" {
		parsed, err := strconv.ParseBool(v)
		if err != nil {
			b.errs = append(b.errs, fmt.Errorf("environment variable %s=%q is not a boolean", env, v))
		} else {
			def = parsed
		}
	}
	b.fs.BoolVar(p, name, def, usage+" (env "+env+")")
}

func (b *binder) integer(p *int, name, env string, def int, usage string) {
	if v, ok := b.getenv(env); ok && v != "" {
		parsed, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			b.errs = append(b.errs, fmt.Errorf("environment variable %s=%q is not an integer", env, v))
		} else {
			def = parsed
		}
	}
	b.fs.IntVar(p, name, def, usage+" (env "+env+")")
}

func (b *binder) number(p *float64, name, env string, def float64, usage string) {
	if v, ok := b.getenv(env); ok && v != "" {
		parsed, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			b.errs = append(b.errs, fmt.Errorf("environment variable %s=%q is not a number", env, v))
		} else {
			def = parsed
		}
	}
	b.fs.Float64Var(p, name, def, usage+" (env "+env+")")
}

func (b *binder) duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	if v, ok := b.getenv(env); ok && v != "" {
		parsed, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			b.errs = append(b.errs, fmt.Errorf("environment variable %s=%q is not a duration (e.g. 30s)", env, v))
		} else {
			def = parsed
		}
	}
	b.fs.DurationVar(p, name, def, usage+" (env "+env+")")
}

func newBinder(cmd string, getenv Getenv) *binder {
	fs := flag.NewFlagSet("relayworker "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if getenv == nil {
		getenv = os.LookupEnv
	}
	return &binder{fs: fs, getenv: getenv}
}

func (b *binder) common(c *Common) {
	b.str(&c.DSN, "dsn", contract.EnvDSN, "", "lib/pq DSN of the primary (never logged)")
	b.str(&c.Schema, "schema", contract.EnvSchema, contract.DefaultSchema, "schema of the outbox table")
	b.str(&c.Table, "table", contract.EnvTable, contract.DefaultTable, "outbox table name")
	b.str(&c.Pipeline, "pipeline", contract.EnvPipeline, "", "pipeline name for logs and metrics")
	b.str(&c.LogLevel, "log-level", contract.EnvLogLevel, contract.DefaultLogLevel, "debug, info or error")
}

func (b *binder) parse(args []string) error {
	if err := b.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ErrHelp
		}
		return err
	}
	if len(b.errs) > 0 {
		return b.errs[0]
	}
	if b.fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", b.fs.Arg(0))
	}
	return nil
}

func (c *Common) validate() error {
	if strings.TrimSpace(c.DSN) == "" {
		return errors.New("--dsn (OUTBOX_DSN) is required")
	}
	t, err := pgident.NewTable(c.Schema, c.Table)
	if err != nil {
		return fmt.Errorf("--schema/--table: %w", err)
	}
	c.T = t
	switch c.LogLevel {
	case "debug", "info", "error":
	default:
		return fmt.Errorf("--log-level (RELAY_LOG_LEVEL) %q must be debug, info or error", c.LogLevel)
	}
	return nil
}

// Usage returns the flag summary of a subcommand: each flag with its environment
// variable and its default (not what the current environment sets).
func Usage(cmd string) string {
	b := newBinder(cmd, func(string) (string, bool) { return "", false })
	switch cmd {
	case "migrate":
		bindMigrate(b, &Migrate{})
	case "relay":
		bindRelay(b, &Relay{})
	case "replay":
		bindReplay(b, &Replay{})
	case "archive":
		bindArchive(b, &Archive{})
	case contract.CommandInboxReplay:
		bindInboxReplay(b, &InboxReplay{})
	}
	var sb strings.Builder
	b.fs.SetOutput(&sb)
	b.fs.PrintDefaults()
	if cmd == contract.CommandInboxReplay {
		sb.WriteString(inboxReplayEnvUsage)
	}
	return sb.String()
}
