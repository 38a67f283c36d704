// Command v1relay is a benchmark peer for `make bench`: a straightforward v1 outbox
// relay as a team would write it in an afternoon against this product's table
// (relayworker migrate's outbox_event): one FOR UPDATE SKIP LOCKED claim statement,
// a kafka-go Writer with BatchSize = the claim batch, and an owner-fenced mark.
// What it leaves out on purpose, so the ratio says what the product's extra work
// buys or costs: no per-aggregate order check (two workers may publish versions of
// one aggregate out of order: the bench's consumer counts it), no retry classes or
// attempts (a failed message is handed back and retried after a second), no broker
// pause.
//
//	v1relay --dsn DSN --brokers host:port[,...] [--batch-size 500] [--lease 30s]
//	        [--poll-interval 200ms] [--batch-timeout 5ms] [--worker-id ID]
//
// It runs until SIGINT/SIGTERM (the batch in flight is finished) and exits 0; bad
// flags exit 2 with one line on stderr, runtime errors exit 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type config struct {
	dsn, brokers, workerID string
	batch                  int
	lease, poll, flush     time.Duration
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("v1relay", flag.ContinueOnError)
	fs.StringVar(&c.dsn, "dsn", "", "PostgreSQL DSN (required)")
	fs.StringVar(&c.brokers, "brokers", "", "comma-separated Kafka host:port (required)")
	fs.StringVar(&c.workerID, "worker-id", "", "identity in owner tokens (default: the host name and pid)")
	fs.IntVar(&c.batch, "batch-size", 500, "rows per claim, and the Writer's BatchSize")
	fs.DurationVar(&c.lease, "lease", 30*time.Second, "lease of a claimed batch")
	fs.DurationVar(&c.poll, "poll-interval", 200*time.Millisecond, "wait after a claim that found nothing")
	fs.DurationVar(&c.flush, "batch-timeout", 5*time.Millisecond, "the Writer's BatchTimeout (kafka-go's default of 1s would hold every write of a partial batch for a second)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.dsn == "" || c.brokers == "":
		return c, errors.New("--dsn and --brokers are required")
	case c.batch < 1 || c.lease <= 0 || c.poll <= 0 || c.flush <= 0:
		return c, errors.New("--batch-size, --lease, --poll-interval and --batch-timeout must be positive")
	}
	if c.workerID == "" {
		h, _ := os.Hostname()
		c.workerID = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	return c, nil
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "v1relay:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	r, err := newRelay(c, strings.Split(c.brokers, ","))
	if err == nil {
		defer r.close()
		err = r.run(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "v1relay:", err)
		os.Exit(1)
	}
}
