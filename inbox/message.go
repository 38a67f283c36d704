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

// FromKafka reads the contract headers of a kafka-go message.
func FromKafka(km kafka.Message) (Message, error) {
	m := Message{Key: km.Key, Payload: km.Value, Headers: make(map[string]string, len(km.Headers))}
	for _, h := range km.Headers {
		m.Headers[h.Key] = string(h.Value)
	}
	m.EventID = m.Headers[HeaderEventID]
	m.EventType = m.Headers[HeaderEventType]
	m.AggregateType = m.Headers[HeaderAggregateType]
	m.AggregateID = m.Headers[HeaderAggregateID]
	if m.EventID == "" {
		return Message{}, fmt.Errorf("%w: topic %s partition %d offset %d has no %s header", ErrInvalidMessage, km.Topic, km.Partition, km.Offset, HeaderEventID)
	}
	if v := m.Headers[HeaderEventVersion]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return Message{}, fmt.Errorf("%w: event %s: %s header %q is not an integer", ErrInvalidMessage, m.EventID, HeaderEventVersion, v)
		}
		m.EventVersion = n
	}
	if v := m.Headers[HeaderAggregateVersion]; v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return Message{}, fmt.Errorf("%w: event %s: %s header %q is not an integer", ErrInvalidMessage, m.EventID, HeaderAggregateVersion, v)
		}
		m.AggregateVersion = n
	}
	return m, nil
}
