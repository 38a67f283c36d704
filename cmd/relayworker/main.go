// Command relayworker runs the outbox relay (see docs/worker-contract.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err := cli.Run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	var cfgErr *cli.ConfigError
	switch {
	case err == nil, errors.Is(err, cli.ErrHelp):
		os.Exit(0)
	case errors.As(err, &cfgErr):
		fmt.Fprintln(os.Stderr, "relayworker: "+err.Error())
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "relayworker: "+err.Error())
		os.Exit(1)
	}
}
