package inbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/outbox-operator/outbox-operator/internal/schema"
	"github.com/segmentio/kafka-go"
)

// Header names the relay sets on every message (docs/architecture.md, "Message contract").
const (
	HeaderEventID          = schema.HeaderEventID
	HeaderEventType        = schema.HeaderEventType
	HeaderEventVersion     = schema.HeaderEventVersion
	HeaderAggregateType    = schema.HeaderAggregateType
	HeaderAggregateID      = schema.HeaderAggregateID
	HeaderAggregateVersion = schema.HeaderAggregateVersion
)

// ErrInvalidMessage marks a message that lacks the relay's contract headers.
var ErrInvalidMessage = errors.New("inbox: invalid message")

// Message is one relayed event as a consumer sees it.
type Message struct {
	EventID          string
	EventType        string
	EventVersion     int
	AggregateType    string
	AggregateID      string
	AggregateVersion int64
	Key              []byte
	Payload          []byte
	// Headers holds every header, the contract ones included.
	Headers map[string]string
}

// RequestHash fingerprints what the event says. The same event id with a different
// hash is a protocol conflict: reusing the first result would be wrong.
func (m Message) RequestHash() string {
	h := sha256.New()
	h.Write([]byte(m.EventType))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(m.EventVersion)))
	h.Write([]byte{0})
	h.Write(m.Payload)
	return hex.EncodeToString(h.Sum(nil))
}

// FromKafka reads the contract headers of a kafka-go message, in either format the
// relay writes: native headers, or the CloudEvents binding (ce_specversion present).
// A native message always has event_id and the CloudEvents format never sends it, so
// a native row's own ce_specversion header does not change how it is read.
func FromKafka(km kafka.Message) (Message, error) {
	m := Message{Key: km.Key, Payload: km.Value, Headers: make(map[string]string, len(km.Headers))}
	for _, h := range km.Headers {
		m.Headers[h.Key] = string(h.Value)
	}
	names := nativeNames
	if sv, ok := m.Headers[schema.CESpecVersion]; ok && m.Headers[HeaderEventID] == "" {
		if sv != "1.0" {
			return Message{}, fmt.Errorf("%w: topic %s partition %d offset %d: %s %q is not 1.0", ErrInvalidMessage, km.Topic, km.Partition, km.Offset, schema.CESpecVersion, sv)
		}
		names = ceNames
	}
	m.EventID = m.Headers[names.eventID]
	m.EventType = m.Headers[names.eventType]
	m.AggregateType = m.Headers[names.aggregateType]
	m.AggregateID = m.Headers[names.aggregateID]
	if m.EventID == "" {
		return Message{}, fmt.Errorf("%w: topic %s partition %d offset %d has no %s header", ErrInvalidMessage, km.Topic, km.Partition, km.Offset, names.eventID)
	}
	var err error
	if m.EventVersion, err = intHeader[int](m, names.eventVersion, strconv.Atoi); err != nil {
		return Message{}, err
	}
	if m.AggregateVersion, err = intHeader(m, names.aggregateVersion, func(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }); err != nil {
		return Message{}, err
	}
	return m, nil
}

// intHeader parses header name of m as an integer; absent is 0.
func intHeader[T int | int64](m Message, name string, parse func(string) (T, error)) (T, error) {
	v := m.Headers[name]
	if v == "" {
		return 0, nil
	}
	n, err := parse(v)
	if err != nil {
		return 0, fmt.Errorf("%w: event %s: %s header %q is not an integer", ErrInvalidMessage, m.EventID, name, v)
	}
	return n, nil
}

// headerNames are where a format puts the contract's fields (docs/architecture.md,
// "Message contract").
type headerNames struct {
	eventID, eventType, eventVersion, aggregateType, aggregateID, aggregateVersion string
}

var (
	nativeNames = headerNames{HeaderEventID, HeaderEventType, HeaderEventVersion,
		HeaderAggregateType, HeaderAggregateID, HeaderAggregateVersion}
	// ceNames: the CloudEvents binding's attributes; the aggregate id is ce_subject.
	ceNames = headerNames{schema.CEID, schema.CEType, schema.CEEventVersion,
		schema.CEAggregateType, schema.CESubject, schema.CEAggregateVersion}
)
