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

const usage = `kubectl outbox: operate outbox-operator pipelines (docs/kubectl-outbox.md)

Commands:
  status                 pipelines, replays and retention policies of a namespace (-A: all)
  trace EVENT_ID         where one event is: outbox row, archive, replay audit, consumers
  trace --aggregate T/ID the outbox rows of one aggregate, in version order
  replay                 create a DeadLetterReplay of a pipeline's DEAD events or a consumer
                         group's parked messages (a server-side dry run unless --confirm)
  version                the plugin's version and the operator's (--client: the plugin's only)

Run "kubectl outbox COMMAND --help" for a command's flags.
`

// command is one subcommand: its flags are bound into fs, run does the work.
type command interface {
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
		fmt.Fprint(stdout, usage)
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

func lookup(name string, stdout, stderr io.Writer) (command, string, error) {
	switch name {
	case "status":
		return &statusCmd{out: stdout}, "status [-n NAMESPACE | -A]", nil
	case "trace":
		return &traceCmd{out: stdout, warn: stderr}, "trace EVENT_ID | --aggregate TYPE/ID [--pipeline NAME] [--consumer-db SECRET/KEY ...]", nil
	case "replay":
		return &replayCmd{out: stdout}, "replay (--pipeline NAME [--dry-run=false] | --consumer-group GROUP --consumer-db SECRET/KEY [--consumer-schema S] [--limit N]) --reason TEXT SELECTOR-FLAGS [--confirm [--follow]]", nil
	case "version":
		return &versionCmd{out: stdout}, "version [--client]", nil
	}
	return nil, "", usagef("unknown command %q; the commands are status, trace, replay and version", name)
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
