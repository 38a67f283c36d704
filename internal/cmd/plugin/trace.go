package plugin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// traceCmd finds one event (or one aggregate's events) in the outbox table of a
// pipeline, its archive and replay audit, and in consumer databases.
type traceCmd struct {
	out, warn      io.Writer
	pipeline       string
	aggregate      string
	consumerDBs    []string
	consumerSchema string
	timeout        time.Duration
	limit          int
}

func (c *traceCmd) bind(fs *pflag.FlagSet) {
	fs.StringVarP(&c.pipeline, "pipeline", "p", "", "the OutboxPipeline to look in (default: search every pipeline of the namespace)")
	fs.StringVar(&c.aggregate, "aggregate", "", "list the rows of one aggregate, TYPE/ID, instead of one event")
	fs.StringArrayVar(&c.consumerDBs, "consumer-db", nil, "SECRET/KEY of a Secret in the namespace holding a consumer database DSN (repeatable)")
	fs.StringVar(&c.consumerSchema, "consumer-schema", "public", "schema of the consumer tables (message_consume, message_consume_parked)")
	fs.DurationVar(&c.timeout, "db-timeout", 5*time.Second, "bound on connecting to and reading each database")
	fs.IntVar(&c.limit, "limit", 100, "with --aggregate: at most this many of the newest versions")
}

// traceArgs is the validated command line.
type traceArgs struct {
	eventID        string
	aggType        string
	aggID          string
	consumerRefs   []dsnSource
	consumerSchema string
}

func (c *traceCmd) parse(s *session, args []string) (traceArgs, error) {
	var ta traceArgs
	if s.all {
		return ta, usagef("trace looks in one namespace; use -n NAMESPACE instead of -A")
	}
	switch {
	case c.aggregate != "" && len(args) > 0:
		return ta, usagef("give either EVENT_ID or --aggregate TYPE/ID, not both")
	case c.aggregate != "":
		typ, id, ok := strings.Cut(c.aggregate, "/")
		if !ok || typ == "" || id == "" {
			return ta, usagef("--aggregate %q: want TYPE/ID, e.g. order/o-42", c.aggregate)
		}
		ta.aggType, ta.aggID = typ, id
		if len(c.consumerDBs) > 0 {
			return ta, usagef("--consumer-db needs an EVENT_ID, not --aggregate")
		}
	case len(args) != 1 || args[0] == "":
		return ta, usagef("trace needs one EVENT_ID (or --aggregate TYPE/ID)")
	default:
		ta.eventID = args[0]
	}
	if c.timeout <= 0 || c.limit <= 0 {
		return ta, usagef("--db-timeout and --limit must be positive")
	}
	if err := pgident.Validate("consumer schema", c.consumerSchema); err != nil {
		return ta, usagef("--consumer-schema: %v", err)
	}
	ta.consumerSchema = c.consumerSchema
	for _, v := range c.consumerDBs {
		ref, err := parseSecretKey("--consumer-db", v)
		if err != nil {
			return ta, err
		}
		ta.consumerRefs = append(ta.consumerRefs, dsnSource{owner: "--consumer-db " + v, ns: s.namespace, ref: ref})
	}
	return ta, nil
}

func (c *traceCmd) run(ctx context.Context, s *session, args []string) error {
	ta, err := c.parse(s, args)
	if err != nil {
		return err
	}
	pipes, err := findPipelines(ctx, s, c.pipeline)
	if err != nil {
		return err
	}
	if ta.aggType != "" {
		return c.traceAggregate(ctx, s, pipes, ta)
	}
	return c.traceEvent(ctx, s, pipes, ta)
}

// traceEvent prints every pipeline holding the event, then the consumers. A missing
// event still shows what the consumer databases know (a Delete-mode retention may
// have removed the row), but ends in an error.
func (c *traceCmd) traceEvent(ctx context.Context, s *session, pipes pipelineSet, ta traceArgs) error {
	found, skipped := 0, 0
	for _, p := range pipes.items {
		loc, err := locate(ctx, s, p, ta.eventID, c.timeout)
		if err != nil {
			if pipes.explicit {
				return err
			}
			skipped++
			fmt.Fprintf(c.warn, "warning: skipped %s\n", oneLine(err.Error()))
			continue
		}
		if loc.v2 != nil {
			found++
			renderV2(c.out, loc)
		} else if loc.row != nil {
			found++
			renderEvent(c.out, loc)
		}
	}
	var errs []error
	if found == 0 {
		errs = append(errs, pipes.notFound(ta.eventID, skipped))
	}
	for _, src := range ta.consumerRefs {
		ct, err := c.consumer(ctx, s, src, ta)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		renderConsumer(c.out, ta.eventID, ct)
	}
	return joinErrors(errs)
}

func (c *traceCmd) consumer(ctx context.Context, s *session, src dsnSource, ta traceArgs) (consumerTrace, error) {
	dsn, err := readDSN(ctx, s.c, src)
	if err != nil {
		return consumerTrace{}, err
	}
	db, err := connect(ctx, dsn, src, c.timeout)
	if err != nil {
		return consumerTrace{}, err
	}
	defer db.Close()
	var ct consumerTrace
	err = db.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		ct, err = traceConsumer(ctx, tx, ta.consumerSchema, ta.eventID)
		return err
	})
	ct.src = src
	return ct, err
}

// joinErrors makes one line of several problems.
func joinErrors(errs []error) error {
	if len(errs) <= 1 {
		return errors.Join(errs...)
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}
