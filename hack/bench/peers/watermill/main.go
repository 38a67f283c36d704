// Command wmforward is a benchmark peer for `make bench`: the stock Watermill SQL ->
// Kafka forwarder (components/forwarder) reading a watermill-sql v4 topic on its
// default PostgreSQL schema and offsets adapter and publishing with the watermill-kafka
// v3 publisher (sarama SyncProducer, acks=all, Kafka key from metadata "key").
//
//	wmforward init    --dsn DSN --outbox-topic NAME
//	wmforward forward --dsn DSN --brokers host:port[,host:port] --outbox-topic NAME
//	                  [--consumer-group G] [--metrics-addr ADDR]
//	                  [--subscribe-batch-size N] [--poll-interval D]
//
// init creates the messages and offsets tables and prints the quoted messages table
// name on stdout. forward runs until SIGINT/SIGTERM and exits 0. Bad flags exit 2 with
// one line on stderr; runtime errors exit 1. See README.md for the row format.
package main

import (
	"context"
	stdsql "database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	_ "github.com/lib/pq" // database/sql driver "postgres"
)

const usage = "usage: wmforward init --dsn DSN --outbox-topic NAME | " +
	"wmforward forward --dsn DSN --brokers HOST:PORT[,...] --outbox-topic NAME [--consumer-group G] [--metrics-addr ADDR] " +
	"[--subscribe-batch-size N] [--poll-interval D]"

// KeyMetadata is the message metadata field whose value becomes the Kafka record key.
const KeyMetadata = "key"

// topicName is what watermill-sql accepts as a topic (it becomes part of the table name).
var topicName = regexp.MustCompile(`^[A-Za-z0-9\-$:._]+$`)

// usageError is a bad command line: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	err := run(os.Args[1:], os.Stdout)
	var ue usageError
	switch {
	case err == nil:
	case errors.As(err, &ue):
		fmt.Fprintln(os.Stderr, "wmforward:", ue.msg)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "wmforward:", err)
		os.Exit(1)
	}
}

type options struct {
	dsn, brokers, topic, group, metricsAddr string
	// The two knobs a user tuning the forwarder for throughput turns; 0 keeps
	// Watermill's defaults (100 rows per SELECT, 1 s PollInterval).
	batchSize    int
	pollInterval time.Duration
}

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{usage}
	}
	cmd := args[0]
	if cmd != "init" && cmd != "forward" {
		return usageError{fmt.Sprintf("unknown command %q; %s", cmd, usage)}
	}
	var o options
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported as one line by main
	fs.StringVar(&o.dsn, "dsn", "", "PostgreSQL DSN (lib/pq)")
	fs.StringVar(&o.topic, "outbox-topic", "", "watermill-sql topic the forwarder reads (table \"watermill_<topic>\")")
	if cmd == "forward" {
		fs.StringVar(&o.brokers, "brokers", "", "comma-separated Kafka bootstrap brokers")
		fs.StringVar(&o.group, "consumer-group", "wmforward", "watermill-sql consumer group (row in the offsets table)")
		fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus text metrics on ADDR/metrics")
		fs.IntVar(&o.batchSize, "subscribe-batch-size", 0, "rows per SELECT (DefaultPostgreSQLSchema.SubscribeBatchSize); 0: Watermill's default, 100")
		fs.DurationVar(&o.pollInterval, "poll-interval", 0, "sleep after a SELECT that found nothing (SubscriberConfig.PollInterval); 0: Watermill's default, 1s")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{err.Error()}
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	case o.dsn == "":
		return usageError{"--dsn is required"}
	case o.topic == "":
		return usageError{"--outbox-topic is required"}
	case !topicName.MatchString(o.topic):
		return usageError{fmt.Sprintf("--outbox-topic %q: watermill-sql allows only %s", o.topic, topicName)}
	case cmd == "forward" && o.brokers == "":
		return usageError{"--brokers is required"}
	case o.batchSize < 0 || o.pollInterval < 0:
		return usageError{fmt.Sprintf("--subscribe-batch-size %d / --poll-interval %s: want 0 (Watermill's default) or more", o.batchSize, o.pollInterval)}
	}

	// Watermill's own std logger at INFO (Debug and Trace loggers nil) on stderr,
	// without NewStdLogger's file:line (it would name this file's wrapper).
	l := log.New(os.Stderr, "[watermill] ", log.LstdFlags|log.Lmicroseconds)
	logger := redactingLogger{&watermill.StdLoggerAdapter{ErrorLogger: l, InfoLogger: l}}

	db, err := stdsql.Open("postgres", o.dsn)
	if err != nil {
		return err
	}
	defer db.Close()

	sub, err := wsql.NewSubscriber(wsql.BeginnerFromStdSQL(db), wsql.SubscriberConfig{
		ConsumerGroup:    o.group,
		SchemaAdapter:    wsql.DefaultPostgreSQLSchema{SubscribeBatchSize: o.batchSize},
		OffsetsAdapter:   wsql.DefaultPostgreSQLOffsetsAdapter{},
		InitializeSchema: true,
		PollInterval:     o.pollInterval,
		// Everything else at Watermill's defaults: ResendInterval 1s (after a nack),
		// RetryInterval 1s (after an error), AckDeadline 30s; with the two flags unset,
		// PollInterval 1s (sleep after an empty SELECT) and 100 rows per SELECT.
	}, logger)
	if err != nil {
		return err
	}
	defer sub.Close()

	if cmd == "init" {
		// Creates "watermill_<topic>" and "watermill_offsets_<topic>" (CREATE TABLE IF
		// NOT EXISTS, under an advisory lock in a transaction).
		if err := sub.SubscribeInitialize(o.topic); err != nil {
			return err
		}
		_, err := fmt.Fprintln(stdout, wsql.DefaultPostgreSQLSchema{}.MessagesTable(o.topic))
		return err
	}
	return forward(o, sub, logger)
}

func forward(o options, sub message.Subscriber, logger watermill.LoggerAdapter) error {
	sc := kafka.DefaultSaramaSyncPublisherConfig() // Retry.Max 10, Return.Successes, V1_0_0_0
	sc.Producer.RequiredAcks = sarama.WaitForAll   // acks=all
	// Java-client-compatible partitioning: toPositive(murmur2(key)) % partitions, the
	// same placement as our relay (kafka-go Murmur2Balancer) and franz-go's default.
	// Sarama's default NewHashPartitioner would use FNV-1a instead.
	sc.Producer.Partitioner = sarama.NewCustomPartitioner(
		sarama.WithAbsFirst(), sarama.WithCustomHashFunction(newMurmur2))

	pub, err := kafka.NewPublisher(kafka.PublisherConfig{
		Brokers: strings.Split(o.brokers, ","),
		// The default marshaler sends every metadata entry as a Kafka header, plus
		// "_watermill_message_uuid"; this one also sets the record key from metadata.
		Marshaler: kafka.NewWithPartitioningMarshaler(func(_ string, msg *message.Message) (string, error) {
			return msg.Metadata.Get(KeyMetadata), nil
		}),
		OverwriteSaramaConfig: sc,
	}, logger)
	if err != nil {
		return err
	}
	defer pub.Close()

	var forwarded atomic.Int64
	fwd, err := forwarder.NewForwarder(sub, pub, logger, forwarder.Config{
		ForwarderTopic: o.topic,
		Middlewares: []message.HandlerMiddleware{func(h message.HandlerFunc) message.HandlerFunc {
			return func(msg *message.Message) ([]*message.Message, error) {
				out, err := h(msg)
				if err == nil {
					forwarded.Add(1)
				}
				return out, err
			}
		}},
	})
	if err != nil {
		return err
	}

	if o.metricsAddr != "" {
		if err := serveMetrics(o.metricsAddr, fwd.Running(), &forwarded); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Run blocks until ctx is cancelled (the router then closes and waits for handlers).
	return fwd.Run(ctx)
}

// serveMetrics serves wmforward_running (1 once the forwarder's router runs) and
// wmforward_forwarded_total (messages published to Kafka and acked) at /metrics.
func serveMetrics(addr string, running <-chan struct{}, forwarded *atomic.Int64) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		up := 0
		select {
		case <-running:
			up = 1
		default:
		}
		fmt.Fprintf(w, "# TYPE wmforward_running gauge\nwmforward_running %d\n", up)
		fmt.Fprintf(w, "# TYPE wmforward_forwarded_total counter\nwmforward_forwarded_total %d\n", forwarded.Load())
	})
	go http.Serve(l, mux) //nolint:errcheck // lives as long as the process
	return nil
}

// redactingLogger drops message contents from log fields: the forwarder logs
// "payload" and "metadata" when an envelope cannot be unwrapped.
type redactingLogger struct{ watermill.LoggerAdapter }

func redact(f watermill.LogFields) watermill.LogFields {
	if _, ok := f["payload"]; !ok {
		if _, ok := f["metadata"]; !ok {
			return f
		}
	}
	f = f.Copy()
	delete(f, "payload")
	delete(f, "metadata")
	return f
}

func (l redactingLogger) Error(msg string, err error, f watermill.LogFields) {
	l.LoggerAdapter.Error(msg, err, redact(f))
}
func (l redactingLogger) Info(msg string, f watermill.LogFields) {
	l.LoggerAdapter.Info(msg, redact(f))
}
func (l redactingLogger) Debug(msg string, f watermill.LogFields) {
	l.LoggerAdapter.Debug(msg, redact(f))
}
func (l redactingLogger) Trace(msg string, f watermill.LogFields) {
	l.LoggerAdapter.Trace(msg, redact(f))
}
func (l redactingLogger) With(f watermill.LogFields) watermill.LoggerAdapter {
	return redactingLogger{l.LoggerAdapter.With(redact(f))}
}
