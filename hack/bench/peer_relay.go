// peer_relay.go: this product, run as a user runs it: `relayworker migrate` once,
// then `relayworker relay` processes with the flags a pod gets, logged in as their
// own database role.

package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/lib/pq"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relayproc"
)

// peer is one relay implementation under test.
type peer interface {
	name() string
	// setup prepares a fresh database (tables, triggers).
	setup(dsn string) error
	// load bulk-loads w's events with COPY in 10,000-row transactions.
	load(db *sql.DB, w *workload) error
	// insertSQL is the plain single-row INSERT an application would run; args gives
	// its parameters for one event.
	insertSQL() string
	args(w *workload, e event) []any
	// start runs n worker processes against dsn.
	start(superDSN, relayDSN, brokers string, n int) ([]*proc, error)
	// settled reports whether the peer's own bookkeeping is finished (the relay: no
	// row left non-terminal).
	settled(db *sql.DB) (bool, error)
}

type relayPeer struct {
	bin     string
	flags   []string // extra relay flags (the drain run's pod settings)
	notify  bool     // migrate --notify-trigger
	label   string
	profile bool     // serve pprof on each worker (switches block sampling on)
	pprof   []string // filled by start: pprof addresses of the workers
	metrics []string // filled by start: metrics addresses of the workers
}

// stages sums the workers' own histograms: mean claim and publish time and mean
// claimed batch size ("" when the workers are gone).
func (p *relayPeer) stages() string {
	var v [6]float64
	names := []string{"outbox_claim_latency_seconds_sum", "outbox_claim_latency_seconds_count",
		"outbox_publish_latency_seconds_sum", "outbox_publish_latency_seconds_count",
		"outbox_claim_batch_size_sum", "outbox_claim_batch_size_count"}
	for _, addr := range p.metrics {
		for i, n := range names {
			x, _ := relayproc.Metric("http://"+addr+"/metrics", n, nil)
			v[i] += x
		}
	}
	if v[1] == 0 || v[3] == 0 || v[5] == 0 {
		return ""
	}
	return fmt.Sprintf("claims %.0f, mean %.1f ms, mean batch %.1f rows; publishes %.0f, mean %.1f ms",
		v[1], 1000*v[0]/v[1], v[4]/v[5], v[3], 1000*v[2]/v[3])
}

func (p *relayPeer) name() string { return p.label }

func (p *relayPeer) setup(dsn string) error {
	args := []string{"migrate", "--dsn", dsn, "--contract", "v1"} // the v1 relay peer; relay-v2 is the v2 one
	if p.notify {
		args = append(args, "--notify-trigger")
	}
	_, err := run(p.bin, args...)
	return err
}

const relayCols = "event_id, aggregate_type, aggregate_id, aggregate_version, event_type, destination, message_key, payload, headers"

func (p *relayPeer) insertSQL() string {
	return `INSERT INTO public.outbox_event (` + relayCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
}

func (p *relayPeer) args(w *workload, e event) []any {
	return []any{w.eventID(e.seq), w.aggType(e.agg), w.aggID(e.agg), e.version, w.eventType(e.agg),
		w.topic(e.agg), w.aggID(e.agg), w.payload(e), w.headers(e)}
}

func (p *relayPeer) load(db *sql.DB, w *workload) error {
	return copyChunks(db, w, "outbox_event", []string{"event_id", "aggregate_type", "aggregate_id",
		"aggregate_version", "event_type", "destination", "message_key", "payload", "headers"},
		func(*sql.Tx) (func(event) []any, error) { return func(e event) []any { return p.args(w, e) }, nil })
}

func (p *relayPeer) start(_, relayDSN, brokers string, n int) ([]*proc, error) {
	var ps []*proc
	p.pprof, p.metrics = nil, nil
	for i := 0; i < n; i++ {
		addrs := make([]string, 2, 3)
		if p.profile {
			addrs = addrs[:3]
		}
		for j := range addrs {
			a, err := freeAddr()
			if err != nil {
				return ps, err
			}
			addrs[j] = a
		}
		args := append([]string{"relay", "--dsn", relayDSN, "--brokers", brokers,
			"--worker-id", "bench-" + strconv.Itoa(i), "--metrics-addr", addrs[0], "--health-addr", addrs[1]}, p.flags...)
		if p.profile {
			args = append(args, "--pprof-addr", addrs[2])
			p.pprof = append(p.pprof, addrs[2])
		}
		pr, err := spawn(fmt.Sprintf("relayworker %d", i), p.bin, nil, args...)
		if err != nil {
			return ps, err
		}
		ps = append(ps, pr)
		p.metrics = append(p.metrics, addrs[0])
	}
	return ps, nil
}

func (p *relayPeer) settled(db *sql.DB) (bool, error) {
	var busy bool
	err := db.QueryRow(`SELECT EXISTS (SELECT 1 FROM public.outbox_event WHERE status IN ('PENDING', 'SENDING', 'RETRY'))`).Scan(&busy)
	return !busy, err
}

// copyChunks COPYs w's events into table in 10,000-row transactions, so created_at
// and next_retry_at (now(), the transaction's time) tie inside a chunk. rowArgs gives
// each chunk's row values; it may look at the chunk's transaction first.
func copyChunks(db *sql.DB, w *workload, table string, cols []string, rowArgs func(*sql.Tx) (func(event) []any, error)) error {
	const chunk = 10000
	for start := 0; start < len(w.events); start += chunk {
		if err := copyChunk(db, table, cols, w.events[start:min(start+chunk, len(w.events))], rowArgs); err != nil {
			return fmt.Errorf("copy into %s: %w", table, err)
		}
	}
	return nil
}

func copyChunk(db *sql.DB, table string, cols []string, evs []event, rowArgs func(*sql.Tx) (func(event) []any, error)) error {
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	args, err := rowArgs(tx)
	if err != nil {
		return err
	}
	st, err := tx.Prepare(pq.CopyIn(table, cols...))
	if err != nil {
		return err
	}
	for _, e := range evs {
		if _, err := st.Exec(args(e)...); err != nil {
			return err
		}
	}
	if _, err := st.Exec(); err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	return tx.Commit()
}
