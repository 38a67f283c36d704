// consumers.go: the consumer run (-runs consumers). A topic of 6 partitions holds
// -consumer-events messages with the contract headers over 200 aggregates, written
// before the run; an inbox.Consumer with a consumer group reads them, dedups each
// (consumer group, event id) and applies a one-row business upsert per message. It
// runs one message per transaction with a prepared statement, then in batches of
// -consumer-batch with four handlers side by side, so the results read as ratios: a
// prepared statement per message, a plain tx.ExecContext per message (as most code is
// written), a no-op (the library's own cost per message) and a batch handler that
// applies the whole batch with one multi-row upsert (inbox.NewBatchConsumer). The
// rate counts from the first handled message to the last, so the group join is not
// in it.

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/inbox"
)

const consumerAggregates = 200

type consumerResult struct {
	mode   string
	events int
	secs   float64
	top    []stmtStat
}

func (r consumerResult) rate() float64 { return float64(r.events) / r.secs }

func consumers(s *stack) error {
	fmt.Printf("consumers: %d messages with contract headers over %d aggregates on 6 partitions, read by an inbox.Consumer\n"+
		"(kafka-go Reader with a GroupID); per message: dedup row + version guard + one-row business upsert\n",
		*consumerEvents, consumerAggregates)
	fmt.Printf("  %-44s %10s %10s %12s %12s\n", "mode", "events", "seconds", "events/s", "target")
	b := fmt.Sprintf("batches of %d", *consumerBatch)
	for i, mode := range []struct {
		name    string
		batch   int
		handler handlerKind
		target  string
	}{
		{"one message per transaction", 1, prepared, ">= 2,000"},
		{b + ", prepared upsert", *consumerBatch, prepared, ">= 10,000"},
		{b + ", tx.ExecContext upsert", *consumerBatch, plainExec, ""},
		{b + ", no-op handler", *consumerBatch, noop, ""},
		{b + ", batch handler", *consumerBatch, batchUpsert, ">= 15,000"},
	} {
		r, err := s.consume("cons-"+strconv.Itoa(i), mode.name, mode.batch, mode.handler)
		if err != nil {
			return fmt.Errorf("consumer %s: %w", mode.name, err)
		}
		fmt.Printf("  %-44s %10d %10.2f %12.0f %12s\n", r.mode, r.events, r.secs, r.rate(), mode.target)
		if *verbose {
			printTop(r.top)
		}
	}
	fmt.Println()
	return nil
}

// consume fills a fresh topic and database and times one consumer over it.
func (s *stack) consume(tag, mode string, batch int, kind handlerKind) (consumerResult, error) {
	res := consumerResult{mode: mode, events: *consumerEvents}
	super, relayDSN, admin, err := s.newDatabase(tag)
	if err != nil {
		return res, err
	}
	admin.Close()
	// The consumer logs in as the relay role, so pg_stat_statements tells its
	// statements from the harness's.
	db, err := sql.Open("postgres", relayDSN)
	if err != nil {
		return res, err
	}
	defer db.Close()
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	ctx := context.Background()
	if err := inbox.Migrate(ctx, db, "public"); err != nil {
		return res, err
	}
	if _, err := db.Exec(`CREATE TABLE balance (account text PRIMARY KEY, events bigint NOT NULL, version bigint NOT NULL)`); err != nil {
		return res, err
	}
	topic := tag + "-events"
	if err := s.createTopics(topic); err != nil {
		return res, err
	}
	if err := s.fillTopic(topic, *consumerEvents); err != nil {
		return res, err
	}
	st, err := inbox.New(db, "public", "bench")
	if err != nil {
		return res, err
	}
	newConsumer, closeHandler, err := handlerFor(kind, db)
	if err != nil {
		return res, err
	}
	defer closeHandler()
	if err := s.resetStatements(); err != nil {
		return res, err
	}
	stopProfile, err := profileHarness(tag)
	if err != nil {
		return res, err
	}
	secs, err := runConsumer(st, newConsumer, batch, s.brokers, topic, *consumerEvents)
	stopProfile()
	res.secs = secs
	if err == nil && kind != noop {
		err = checkApplied(db, *consumerEvents)
	}
	if err == nil && *verbose {
		res.top, err = s.topStatements(dbName(super))
	}
	return res, err
}

// runConsumer runs one consumer until n messages were handled and returns the seconds
// from the first to the last.
func runConsumer(st *inbox.Store, newConsumer consumerMaker, batch int, brokers, topic string, n int) (float64, error) {
	var handled atomic.Int64
	var first, last atomic.Int64
	done := make(chan struct{})
	c, err := newConsumer(st, inbox.Options{BatchSize: batch, Observe: func(inbox.Message, inbox.Outcome) {
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		last.Store(now)
		if handled.Add(1) == int64(n) {
			close(done)
		}
	}})
	if err != nil {
		return 0, err
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{brokers}, GroupID: "bench", Topic: topic,
		MaxWait: 50 * time.Millisecond, QueueCapacity: 1000, MinBytes: 1, MaxBytes: 16 << 20})
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx, r) }()
	select {
	case <-done:
	case err := <-errc:
		return 0, fmt.Errorf("consumer stopped after %d of %d messages: %w", handled.Load(), n, err)
	case <-time.After(10 * time.Minute):
		return 0, fmt.Errorf("only %d of %d messages handled in 10 minutes", handled.Load(), n)
	}
	return time.Duration(last.Load() - first.Load()).Seconds(), nil
}

// fillTopic writes n messages with the contract headers, versions 1, 2, ... per
// aggregate, key = aggregate id.
func (s *stack) fillTopic(topic string, n int) error {
	w := &kafka.Writer{Addr: kafka.TCP(s.brokers), Balancer: &kafka.Murmur2Balancer{}, RequiredAcks: kafka.RequireAll,
		BatchSize: 1000, BatchBytes: 16 << 20, BatchTimeout: time.Millisecond}
	defer w.Close()
	h := func(k, v string) kafka.Header { return kafka.Header{Key: k, Value: []byte(v)} }
	version := make([]int64, consumerAggregates)
	msgs := make([]kafka.Message, 0, n)
	for i := 0; i < n; i++ {
		agg := i % consumerAggregates
		version[agg]++
		id := "acct-" + strconv.Itoa(agg)
		msgs = append(msgs, kafka.Message{Topic: topic, Key: []byte(id),
			Value: []byte(`{"account":"` + id + `","amount":100,"currency":"EUR"}`),
			Headers: []kafka.Header{h(inbox.HeaderEventID, topic+"-"+strconv.Itoa(i)), h(inbox.HeaderEventType, "PaymentSucceeded"),
				h(inbox.HeaderEventVersion, "1"), h(inbox.HeaderAggregateType, "Account"), h(inbox.HeaderAggregateID, id),
				h(inbox.HeaderAggregateVersion, strconv.FormatInt(version[agg], 10))}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := 0; i < len(msgs); i += 5000 {
		chunk := msgs[i:min(i+5000, len(msgs))]
		// A topic just created may not be in the writer's metadata yet.
		for try := 1; ; try++ {
			err := w.WriteMessages(ctx, chunk...)
			if err == nil {
				break
			}
			if !errors.Is(err, kafka.UnknownTopicOrPartition) || try == 50 {
				return fmt.Errorf("fill topic %s: %w", topic, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// checkApplied fails the run when the handler did not apply every event once: a fast
// handler that drops work is no result.
func checkApplied(db *sql.DB, n int) error {
	var sum int64
	if err := db.QueryRow(`SELECT coalesce(sum(events), 0) FROM balance`).Scan(&sum); err != nil {
		return fmt.Errorf("read balance: %w", err)
	}
	if sum != int64(n) {
		return fmt.Errorf("balance counts %d events, want %d", sum, n)
	}
	return nil
}

// profileHarness starts a CPU profile of this process (the consumer runs in it) into
// -profile DIR/<tag>-cpu.pb.gz, if -profile is set; the returned func stops it.
func profileHarness(tag string) (stop func(), err error) {
	if *profile == "" {
		return func() {}, nil
	}
	f, err := os.Create(filepath.Join(*profile, tag+"-cpu.pb.gz"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
