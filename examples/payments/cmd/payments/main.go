// Command payments runs the "payment succeeded" example against a running stack
// (`make demo`, or any PostgreSQL with an OutboxPipeline on public.outbox_event and a
// broker): it places and pays orders, runs the points, notification and search
// consumers, and prints the reconciliation report. Exit code 0: every derived result
// is there exactly once (or parked with a reason); 1: mismatches or an error; 2: bad
// flags. See examples/payments/README.md.
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

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/outbox-operator/outbox-operator/examples/payments"
)

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("payments", flag.ContinueOnError)
	dsn := fs.String("dsn", os.Getenv("PAYMENTS_DSN"), "lib/pq DSN of the database with public.outbox_event (env PAYMENTS_DSN; never logged)")
	brokers := fs.String("brokers", os.Getenv("PAYMENTS_BROKERS"), "comma-separated host:port list (env PAYMENTS_BROKERS)")
	topic := fs.String("topic", payments.DefaultTopic, "topic of the order events (created if missing)")
	orders := fs.Int("orders", 50, "orders to place; every tenth stays unpaid")
	poison := fs.Bool("poison", true, "pay one order in a currency the points programme rejects (it is parked)")
	smsRate := fs.Float64("sms-rate", 20, "SMS gateway calls per second")
	wait := fs.Duration("wait", 2*time.Minute, "how long to wait for every derived result")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if *dsn == "" || *brokers == "" || *orders < 1 {
		fmt.Fprintln(os.Stderr, "payments: --dsn and --brokers are required, --orders must be at least 1")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := funcr.NewJSON(func(obj string) { fmt.Fprintln(os.Stderr, obj) }, funcr.Options{LogTimestamp: true})

	rep, err := scenario(ctx, log, *dsn, payments.Scenario{
		Brokers: strings.Split(*brokers, ","), Topic: *topic, Orders: *orders,
		Poison: *poison, SMSRate: *smsRate, Wait: *wait, Log: log,
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error(err, "payments example failed")
		return 1
	}
	fmt.Print(rep.String())
	if !rep.OK() {
		return 1
	}
	return 0
}

func scenario(ctx context.Context, log logr.Logger, dsn string, s payments.Scenario) (payments.Report, error) {
	db, err := payments.OpenDB(ctx, dsn)
	if err != nil {
		return payments.Report{}, err
	}
	defer db.Close()
	s.DB = db
	log.Info("running the payments example", "topic", s.Topic, "orders", s.Orders)
	return s.Run(ctx)
}
