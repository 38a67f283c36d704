package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Exit codes: 1 for a failed command, 2 for a command line that cannot be run.
const (
	exitFailed = 1
	exitUsage  = 2
)

// commands in the order the usage lists them: the same shape as relayworker's
// subcommand table (internal/relayworker/cli), one entry per verb, each in its own file.
var commands = []command{
	{name: "status", synopsis: "status [-n NAMESPACE | -A]",
		summary: []string{"status                 pipelines, replays and retention policies of a namespace (-A: all)"},
		new:     func(stdout, _ io.Writer) verb { return &statusCmd{out: stdout} }},
	{name: "trace", synopsis: "trace EVENT_ID | --aggregate TYPE/ID [--pipeline NAME] [--consumer-db SECRET/KEY ...]",
		summary: []string{
			"trace EVENT_ID         where one event is: outbox row, archive, replay audit, consumers",
			"trace --aggregate T/ID the outbox rows of one aggregate, in version order"},
		new: func(stdout, stderr io.Writer) verb { return &traceCmd{out: stdout, warn: stderr} }},
	{name: "replay", synopsis: "replay (--pipeline NAME [--dry-run=false] | --consumer-group GROUP --consumer-db SECRET/KEY [--consumer-schema S] [--limit N]) --reason TEXT SELECTOR-FLAGS [--confirm [--follow]]",
		summary: []string{
			"replay                 create a DeadLetterReplay of a pipeline's DEAD events or a consumer",
			"                       group's parked messages (a server-side dry run unless --confirm)"},
		new: func(stdout, _ io.Writer) verb { return &replayCmd{out: stdout} }},
	{name: "version", synopsis: "version [--client]",
		summary: []string{"version                the plugin's version and the operator's (--client: the plugin's only)"},
		new:     func(stdout, _ io.Writer) verb { return &versionCmd{out: stdout} }},
}

// command is one subcommand: its name, the synopsis its --help prints, its lines in
// the usage, and new, which makes the verb that binds its flags and runs it.
type command struct {
	name     string
	synopsis string
	summary  []string
	new      func(stdout, stderr io.Writer) verb
}

// verb is what a subcommand does: its flags are bound into fs, run does the work.
type verb interface {
	bind(fs *pflag.FlagSet)
	run(ctx context.Context, s *session, args []string) error
}

// usageError is a command line that cannot be run; it exits with exitUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// Main runs the plugin with args (without the program name) and returns the exit
// code. Every error is printed as one line on stderr, never a stack trace.
func Main(args []string, stdout, stderr io.Writer) (code int) {
	quietLibraries()
	defer func() {
		// A bug must still end in one line, not a goroutine dump.
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "error: internal error (please report it): %v\n", r)
			code = exitFailed
		}
	}()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := dispatch(ctx, args, stdout, stderr)
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "error: %s\n", oneLine(err.Error()))
		return exitUsage
	default:
		fmt.Fprintf(stderr, "error: %s\n", oneLine(err.Error()))
		return exitFailed
	}
}

// dispatch picks the subcommand, parses its flags and runs it.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage())
		return nil
	}
	cmd, synopsis, err := lookup(args[0], stdout, stderr)
	if err != nil {
		return err
	}
	own := pflag.NewFlagSet(args[0], pflag.ContinueOnError)
	cmd.bind(own)
	conn := pflag.NewFlagSet("connection", pflag.ContinueOnError)
	kf := bindKubeFlags(conn)
	fs := pflag.NewFlagSet("kubectl outbox "+args[0], pflag.ContinueOnError)
	fs.AddFlagSet(own)
	fs.AddFlagSet(conn)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: kubectl outbox %s\n\nFlags:\n%s\nConnection flags (as for kubectl):\n%s", synopsis, own.FlagUsages(), conn.FlagUsages())
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return usagef("%v (see kubectl outbox %s --help)", err, args[0])
	}
	if v, ok := cmd.(*versionCmd); ok {
		return v.runWith(ctx, kf.session, fs.Args()) // prints the plugin's version before connecting
	}
	s, err := kf.session()
	if err != nil {
		return err
	}
	return cmd.run(ctx, s, fs.Args())
}

func lookup(name string, stdout, stderr io.Writer) (verb, string, error) {
	names := make([]string, len(commands))
	for i, c := range commands {
		if c.name == name {
			return c.new(stdout, stderr), c.synopsis, nil
		}
		names[i] = c.name
	}
	return nil, "", usagef("unknown command %q; the commands are %s and %s", name,
		strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// usage lists the commands (docs/kubectl-outbox.md).
func usage() string {
	var b strings.Builder
	b.WriteString("kubectl outbox: operate outbox-operator pipelines (docs/kubectl-outbox.md)\n\nCommands:\n")
	for _, c := range commands {
		for _, line := range c.summary {
			b.WriteString("  " + line + "\n")
		}
	}
	b.WriteString("\nRun \"kubectl outbox COMMAND --help\" for a command's flags.\n")
	return b.String()
}

// quietLibraries keeps library logging out of the output: controller-runtime would
// otherwise print a stack trace about an unset logger, and client-go's klog lines
// are not meant for plugin users.
func quietLibraries() {
	logf.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
}

// oneLine folds a multi-line error (some API errors are) into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
