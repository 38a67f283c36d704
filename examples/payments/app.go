package payments

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/inbox"
)

// App runs the consumer side: the three consumer groups, each with its own reader,
// and the SMS dispatcher.
type App struct {
	DB      *sql.DB
	Brokers []string
	Topic   string
	Log     logr.Logger
	Gateway SMSGateway
	// SMSRate bounds the calls per second to the gateway (default 20).
	SMSRate float64
	// Groups are the consumer groups to run (nil: all three). The SMS dispatcher runs
	// with the notification group.
	Groups []string
	// Tune, if set, adjusts a group's inbox.Options after the defaults.
	Tune func(group string, o *inbox.Options)
	// TuneDispatch, if set, adjusts the dispatcher's options after the defaults.
	TuneDispatch func(o *inbox.DispatchOptions)
	// Wrap, if set, wraps a group's reader (the tests inject faults with it). The
	// wrapper must be comparable (a pointer, say): the inbox keys the messages a Run
	// left uncommitted by the reader, for the next Run on it.
	Wrap func(group string, r *kafka.Reader) inbox.Fetcher
	// RestartDelay is the pause before a stopped consumer runs again (default 1s).
	RestartDelay time.Duration
}

// AllGroups are the example's consumer groups.
var AllGroups = []string{GroupPoints, GroupNotification, GroupSearch}

// Run runs the groups until ctx ends, and returns nil then. It returns early only if
// a consumer could not be built.
func (a *App) Run(ctx context.Context) error {
	notify, err := NewNotification(a.DB)
	if err != nil {
		return err
	}
	handlers := map[string]inbox.HandlerFunc{GroupPoints: HandlePoints, GroupNotification: notify.Handle, GroupSearch: HandleSearch}
	groups := a.Groups
	if groups == nil {
		groups = AllGroups
	}
	var runs []func(context.Context) error
	for _, g := range groups {
		fn, ok := handlers[g]
		if !ok {
			return fmt.Errorf("payments: unknown consumer group %q", g)
		}
		c, err := NewConsumer(a.DB, g, fn, a.options(g))
		if err != nil {
			return err
		}
		runs = append(runs, a.runGroup(g, c))
	}
	if slices.Contains(groups, GroupNotification) {
		if a.Gateway == nil {
			return errors.New("payments: the notification group needs a Gateway")
		}
		runs = append(runs, func(ctx context.Context) error { return notify.Dispatch(ctx, a.Gateway, a.dispatchOptions()) })
	}
	return runAll(ctx, runs)
}

func (a *App) options(group string) inbox.Options {
	o := inbox.Options{BatchSize: 20, Log: a.Log}
	if a.Tune != nil {
		a.Tune(group, &o)
	}
	return o
}

func (a *App) dispatchOptions() inbox.DispatchOptions {
	o := inbox.DispatchOptions{Rate: a.SMSRate, Log: a.Log}
	if o.Rate <= 0 {
		o.Rate = 20
	}
	if a.TuneDispatch != nil {
		a.TuneDispatch(&o)
	}
	return o
}

// runGroup returns the loop of one group: its reader, wrapped if asked, and
// RunConsumer on it.
func (a *App) runGroup(group string, c *inbox.Consumer) func(context.Context) error {
	return func(ctx context.Context) error {
		r := kafka.NewReader(ReaderConfig(a.Brokers, group, a.Topic))
		defer r.Close()
		var f inbox.Fetcher = r
		if a.Wrap != nil {
			f = a.Wrap(group, r)
		}
		delay := a.RestartDelay
		if delay <= 0 {
			delay = time.Second
		}
		return RunConsumer(ctx, a.Log, group, c, f, delay)
	}
}

// runAll runs every fn until ctx ends and returns the errors that are not ctx's.
func runAll(ctx context.Context, fns []func(context.Context) error) error {
	errs := make(chan error, len(fns))
	for _, fn := range fns {
		go func() { errs <- fn(ctx) }()
	}
	var all []error
	for range fns {
		if err := <-errs; !isStop(err) {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}
