// peer_watermill.go: the named peer, Watermill's SQL -> Kafka forwarder
// (hack/bench/peers/watermill, its own module: watermill-sql v4 on the default
// PostgreSQL schema and offsets adapter, watermill-kafka v3 publisher with acks=all and
// the key from metadata). Rows carry Watermill's forwarder envelope; the metadata holds
// the same headers our relay sends, so both put the same bytes on the wire.
// watermill-tuned is the same forwarder tuned as a user tuning it for throughput
// would: the relay's batch size and poll interval (drainFlags), nothing else changed.

package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

const wmTopic = "outbox"

type watermillPeer struct {
	bin   string
	label string
	flags []string // extra `wmforward forward` flags
	table string   // quoted, as `wmforward init` printed it
}

func (s *stack) watermill() *watermillPeer { return &watermillPeer{bin: s.peerBin, label: "watermill"} }

// watermillTuned: SubscribeBatchSize = the relay's --batch-size, PollInterval = its
// --poll-interval (drain settings), everything else as the default peer.
func (s *stack) watermillTuned() *watermillPeer {
	return &watermillPeer{bin: s.peerBin, label: "watermill-tuned",
		flags: []string{"--subscribe-batch-size", flagValue(drainFlags, "--batch-size"),
			"--poll-interval", flagValue(drainFlags, "--poll-interval")}}
}

// flagValue is the value after name in flags ("" when absent).
func flagValue(flags []string, name string) string {
	for i := 0; i+1 < len(flags); i++ {
		if flags[i] == name {
			return flags[i+1]
		}
	}
	return ""
}

func (p *watermillPeer) name() string { return p.label }

func (p *watermillPeer) setup(dsn string) error {
	out, err := run(p.bin, "init", "--dsn", dsn, "--outbox-topic", wmTopic)
	if err != nil {
		return err
	}
	p.table = strings.TrimSpace(out)
	if !strings.HasPrefix(p.table, `"watermill_`) {
		return fmt.Errorf("wmforward init printed %q, want the quoted table name", p.table)
	}
	return nil
}

// envelope is components/forwarder's wire format (payload is base64 via []byte).
type envelope struct {
	DestinationTopic string            `json:"destination_topic"`
	UUID             string            `json:"uuid"`
	Payload          []byte            `json:"payload"`
	Metadata         map[string]string `json:"metadata"`
}

func (p *watermillPeer) envelope(w *workload, e event) string {
	id := w.eventID(e.seq)
	md := map[string]string{
		"key": w.aggID(e.agg), "event_id": id, "event_type": w.eventType(e.agg), "event_version": "1",
		"aggregate_type": w.aggType(e.agg), "aggregate_id": w.aggID(e.agg),
		"aggregate_version": strconv.FormatInt(e.version, 10),
	}
	if h, ok := w.headers(e).(string); ok {
		var extra map[string]string
		_ = json.Unmarshal([]byte(h), &extra)
		for k, v := range extra {
			md[k] = v
		}
	}
	b, _ := json.Marshal(envelope{DestinationTopic: w.topic(e.agg), UUID: id, Payload: []byte(w.payload(e)), Metadata: md})
	return string(b)
}

func (p *watermillPeer) insertSQL() string {
	return `INSERT INTO ` + p.table + ` (uuid, payload, metadata, transaction_id) VALUES ($1, $2, '{}', pg_current_xact_id())`
}

func (p *watermillPeer) args(w *workload, e event) []any {
	return []any{w.eventID(e.seq), p.envelope(w, e)}
}

// load COPYs 10,000-row chunks; every row of a chunk carries its transaction's id, as
// Watermill's own INSERT (pg_current_xact_id()) would store it.
func (p *watermillPeer) load(db *sql.DB, w *workload) error {
	return copyChunks(db, w, "watermill_"+wmTopic, []string{"uuid", "payload", "metadata", "transaction_id"},
		func(tx *sql.Tx) (func(event) []any, error) {
			var xid string
			if err := tx.QueryRow(`SELECT pg_current_xact_id()::text`).Scan(&xid); err != nil {
				return nil, err
			}
			return func(e event) []any { return []any{w.eventID(e.seq), p.envelope(w, e), "{}", xid} }, nil
		})
}

func (p *watermillPeer) start(_, relayDSN, brokers string, n int) ([]*proc, error) {
	var ps []*proc
	for i := 0; i < n; i++ {
		args := append([]string{"forward", "--dsn", relayDSN, "--brokers", brokers, "--outbox-topic", wmTopic}, p.flags...)
		pr, err := spawn(fmt.Sprintf("wmforward %d", i), p.bin, nil, args...)
		if err != nil {
			return ps, err
		}
		ps = append(ps, pr)
	}
	return ps, nil
}

// settled: the forwarder keeps no per-row state; what the consumer read is the result.
func (p *watermillPeer) settled(*sql.DB) (bool, error) { return true, nil }
