// Package outbox is the producer side of the transactional outbox: applications call
// Publish with the *sql.Tx that also writes their business rows, so the event is
// committed if and only if the business change is. The relay worker (relayworker
// relay) later publishes the rows to Kafka.
//
//	tx, _ := db.BeginTx(ctx, nil)
//	tx.ExecContext(ctx, `UPDATE orders SET status = 'paid' WHERE id = $1`, id)
//	pub.Publish(ctx, tx, outbox.Event{...})
//	tx.Commit()
//
// Event ids must be stable: derive them from the business fact (EventID) rather than
// generating a random id per attempt. When an application retries an operation whose
// commit outcome it did not see (connection lost during COMMIT), the same id makes the
// second insert fail on the primary key instead of creating a second event for the
// same fact, and consumers, which deduplicate by event_id, see one event. Replays of
// DEAD events also keep their original id.
package outbox

import (
	"context"
	"crypto/sha1" //nolint:gosec // UUIDv5 is defined on SHA-1; not used for security
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// ErrInvalidEvent wraps every validation error of Publish.
var ErrInvalidEvent = errors.New("outbox: invalid event")

// Event is one outbox row.
type Event struct {
	// EventID identifies the event for consumers' deduplication; see EventID.
	EventID          string
	AggregateType    string
	AggregateID      string
	AggregateVersion int64 // >= 1, unique per aggregate, increasing
	EventType        string
	EventVersion     int    // schema version of the payload; 0 means 1
	Destination      string // Kafka topic
	MessageKey       string // Kafka key; empty means AggregateID
	// Payload is the message value; it must be valid JSON (the column is json on a
	// table of contract v2, which keeps these bytes as they are, jsonb on v1).
	Payload json.RawMessage
	// Headers are extra Kafka headers. The relay sets event_id, event_type,
	// event_version, aggregate_type, aggregate_id and aggregate_version itself.
	// When Publish's ctx carries a span and Headers has no traceparent, Publish
	// adds the trace context (W3C traceparent/tracestate; docs/monitoring.md,
	// "Tracing").
	Headers map[string]string
}

// Publisher inserts events into one outbox table.
type Publisher struct {
	t       pgident.Table
	channel string
}

// New returns a Publisher for schema.table (validated identifiers; "" means public).
func New(schemaName, table string) (*Publisher, error) {
	if schemaName == "" {
		schemaName = "public"
	}
	t, err := pgident.NewTable(schemaName, table)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return &Publisher{t: t, channel: schema.Channel(t)}, nil
}

// Default is the Publisher for public.outbox_event.
func Default() *Publisher {
	p, _ := New("public", "outbox_event")
	return p
}

var reservedHeaders = func() map[string]bool {
	m := map[string]bool{}
	for _, h := range schema.ContractHeaders {
		m[h] = true
	}
	return m
}()

// Validate checks one event and returns an error wrapping ErrInvalidEvent.
func (e *Event) Validate() error {
	bad := func(format string, args ...any) error {
		id := e.EventID
		if id == "" {
			id = "(no id)"
		}
		return fmt.Errorf("%w %s: %s", ErrInvalidEvent, id, fmt.Sprintf(format, args...))
	}
	switch {
	case strings.TrimSpace(e.EventID) == "":
		return bad("EventID is empty (use outbox.EventID to derive a stable one)")
	case strings.TrimSpace(e.AggregateType) == "":
		return bad("AggregateType is empty")
	case strings.TrimSpace(e.AggregateID) == "":
		return bad("AggregateID is empty")
	case e.AggregateVersion < 1:
		return bad("AggregateVersion %d must be >= 1", e.AggregateVersion)
	case strings.TrimSpace(e.EventType) == "":
		return bad("EventType is empty")
	case e.EventVersion < 0:
		return bad("EventVersion %d must be >= 1", e.EventVersion)
	case strings.TrimSpace(e.Destination) == "":
		return bad("Destination (Kafka topic) is empty")
	case len(e.Payload) == 0:
		return bad("Payload is empty")
	case !json.Valid(e.Payload):
		return bad("Payload is not valid JSON (the payload column is json or jsonb)")
	}
	if err := schema.ValidTopic(e.Destination); err != nil {
		return bad("%v", err)
	}
	for k := range e.Headers {
		if k == "" {
			return bad("header with an empty name")
		}
		if reservedHeaders[k] {
			return bad("header %q is set by the relay and cannot be overridden", k)
		}
	}
	return nil
}

// maxPerStatement keeps one INSERT under PostgreSQL's 65535 bind parameters.
const maxPerStatement = 1000

// Publish validates the events and inserts them in tx (the caller's transaction), in
// one multi-row INSERT per 1000 events, and asks the relay to wake up once
// (pg_notify; PostgreSQL folds identical notifications of one transaction and only
// delivers them if tx commits). Nothing is inserted when any event is invalid. The
// trace context of ctx, if any, is recorded in each event's headers (Event.Headers).
func (p *Publisher) Publish(ctx context.Context, tx *sql.Tx, events ...Event) error {
	if tx == nil {
		return errors.New("outbox: Publish needs the caller's transaction (tx is nil)")
	}
	if len(events) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(events))
	for i := range events {
		if err := events[i].Validate(); err != nil {
			return err
		}
		if seen[events[i].EventID] {
			return fmt.Errorf("%w %s: duplicate EventID in one Publish call", ErrInvalidEvent, events[i].EventID)
		}
		seen[events[i].EventID] = true
	}
	for start := 0; start < len(events); start += maxPerStatement {
		end := min(start+maxPerStatement, len(events))
		query, args, err := p.insert(ctx, events[start:end], end == len(events))
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, query, args...); err != nil {
			return fmt.Errorf("outbox: insert into %s: %w", p.t, err)
		}
	}
	return nil
}

func (p *Publisher) insert(ctx context.Context, events []Event, notify bool) (string, []any, error) {
	var sb strings.Builder
	args := make([]any, 0, len(events)*10+1)
	sb.WriteString(`INSERT INTO ` + p.t.Qualified() + ` (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, event_version, destination, message_key, payload, headers) VALUES `)
	for i := range events {
		e := &events[i]
		if i > 0 {
			sb.WriteByte(',')
		}
		n := len(args)
		sb.WriteByte('(')
		for j := 1; j <= 10; j++ {
			if j > 1 {
				sb.WriteByte(',')
			}
			sb.WriteString("$" + strconv.Itoa(n+j))
			switch j {
			case 9, 10:
				// json, not jsonb: payload and headers are json on v2 tables (a
				// jsonb cast would parse and print every payload once more there)
				// and jsonb on v1 (PostgreSQL's assignment cast). Not uncast: into a
				// bytea column the text would be read as bytea escapes (a JSON
				// "\\" stored as one backslash); json there is a clear type error.
				sb.WriteString("::json")
			}
		}
		sb.WriteByte(')')
		key := e.MessageKey
		if key == "" {
			key = e.AggregateID
		}
		ver := e.EventVersion
		if ver == 0 {
			ver = 1
		}
		var headers any
		if h := traceHeaders(ctx, e.Headers); len(h) > 0 {
			b, err := json.Marshal(h)
			if err != nil {
				return "", nil, fmt.Errorf("%w %s: headers: %v", ErrInvalidEvent, e.EventID, err)
			}
			headers = string(b)
		}
		args = append(args, e.EventID, e.AggregateType, e.AggregateID, e.AggregateVersion, e.EventType, ver,
			e.Destination, key, string(e.Payload), headers)
	}
	if !notify {
		return sb.String(), args, nil
	}
	// One round trip: the data-modifying CTE always runs; the NOTIFY is sent at most
	// once per Publish call and only delivered on commit.
	args = append(args, p.channel)
	return `WITH ins AS (` + sb.String() + `) SELECT pg_notify($` + strconv.Itoa(len(args)) + `, '')`, args, nil
}

// namespaceOutbox is the UUID namespace of EventID (a fixed random UUID).
var namespaceOutbox = [16]byte{0x6b, 0x1d, 0x3f, 0x52, 0x8a, 0x41, 0x4e, 0x2c, 0x9d, 0x07, 0x5e, 0x33, 0xa1, 0xc8, 0x44, 0x90}

// EventID returns a deterministic UUID (version 5, SHA-1 name-based) for a business
// fact: the same namespace and parts always give the same id, different ones a
// different id. Typical use: EventID("payment-succeeded", paymentID) or
// EventID("order", orderID, strconv.FormatInt(version, 10)).
func EventID(namespace string, parts ...string) string {
	h := sha1.New() //nolint:gosec // see import
	h.Write(namespaceOutbox[:])
	// Length-prefix every element so ("ab","c") and ("a","bc") differ.
	for _, s := range append([]string{namespace}, parts...) {
		h.Write([]byte(strconv.Itoa(len(s)) + ":" + s))
	}
	sum := h.Sum(nil)
	var u [16]byte
	copy(u[:], sum[:16])
	u[6] = (u[6] & 0x0f) | 0x50 // version 5
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 4122 variant
	var buf [36]byte
	hex.Encode(buf[0:8], u[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], u[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], u[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], u[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:], u[10:])
	return string(buf[:])
}
