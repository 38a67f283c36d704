// message.go: one claimed row -> one Kafka message (docs/architecture.md, "Message
// contract"), and the per-row data problems found before anything is sent.

package publish

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// Size approximates the Kafka record size of m (key, value, headers, overhead).
func Size(m kafka.Message) int64 {
	n := int64(len(m.Key) + len(m.Value) + 32)
	for _, h := range m.Headers {
		n += int64(len(h.Key) + len(h.Value) + 8)
	}
	return n
}

// BadEventError is a per-event data problem found before publishing; the row goes
// DEAD with Code without anything being sent.
type BadEventError struct {
	Code string
	Msg  string
}

func (e *BadEventError) Error() string { return e.Code + ": " + e.Msg }

// Format says how the relay writes the message contract onto a record
// (docs/architecture.md, "Message contract"). The zero value is the native format.
type Format struct {
	// CloudEvents selects the CloudEvents Kafka binding in binary mode (cloudevents.go)
	// instead of the native headers.
	CloudEvents bool
	// Source is ce_source, a URI reference naming the pipeline (CloudEvents only).
	Source string
	// ContentType is the content-type header (CloudEvents only; ContentTypeFor the
	// payload column); empty: none.
	ContentType string
}

// Message maps a claimed row to a Kafka message: topic = destination, key =
// message_key, value = payload bytes, headers = the format's contract headers plus
// every pair of the headers column (an object of strings; contract headers cannot be
// overridden).
func (f Format) Message(r *event.Row) (kafka.Message, error) {
	if strings.TrimSpace(r.Destination) == "" {
		return kafka.Message{}, &BadEventError{CodeEmptyDestination, "destination (topic) is empty"}
	}
	if err := schema.ValidTopic(r.Destination); err != nil {
		return kafka.Message{}, &BadEventError{CodeInvalidTopic, err.Error()}
	}
	if r.Payload == nil {
		return kafka.Message{}, &BadEventError{CodeInvalidPayload, "payload is NULL"}
	}
	has, extra := hasHeaders(r), 0
	if has {
		extra = bytes.Count(r.Headers, []byte{':'}) // at least one per pair
	}
	var hdrs []kafka.Header
	var isReserved func(string) bool
	switch {
	case f.CloudEvents && r.EventType == "":
		return kafka.Message{}, &BadEventError{CodeInvalidHeaders, "event_type is empty (CloudEvents requires ce_type)"}
	case f.CloudEvents:
		hdrs, isReserved = f.ceHeaders(r), f.ceReservedHeader
	default:
		hdrs, isReserved = nativeHeaders(r, extra), reservedNative
	}
	if has {
		var err error
		if hdrs, err = appendHeaders(hdrs, r.Headers, isReserved); err != nil {
			return kafka.Message{}, &BadEventError{CodeInvalidHeaders, err.Error()}
		}
	}
	return kafka.Message{Topic: r.Destination, Key: []byte(r.MessageKey), Value: r.Payload, Headers: hdrs}, nil
}

// nativeHeaders are the native format's contract headers of r, with room for extra
// more (the headers column's pairs). The values share one allocation: six small ones
// per event were a fifth of Message's time.
func nativeHeaders(r *event.Row, extra int) []kafka.Header {
	buf := make([]byte, 0, len(r.EventID)+len(r.EventType)+len(r.AggregateType)+len(r.AggregateID)+40)
	var ends [6]int
	buf = append(buf, r.EventID...)
	ends[0] = len(buf)
	buf = append(buf, r.EventType...)
	ends[1] = len(buf)
	buf = strconv.AppendInt(buf, int64(r.EventVersion), 10)
	ends[2] = len(buf)
	buf = append(buf, r.AggregateType...)
	ends[3] = len(buf)
	buf = append(buf, r.AggregateID...)
	ends[4] = len(buf)
	buf = strconv.AppendInt(buf, r.AggregateVersion, 10)
	ends[5] = len(buf)
	keys := [6]string{schema.HeaderEventID, schema.HeaderEventType, schema.HeaderEventVersion,
		schema.HeaderAggregateType, schema.HeaderAggregateID, schema.HeaderAggregateVersion}
	h := make([]kafka.Header, 6, 6+extra)
	start := 0
	for i, end := range ends {
		h[i] = kafka.Header{Key: keys[i], Value: buf[start:end:end]}
		start = end
	}
	return h
}

func reservedNative(k string) bool { return reserved[k] }

// reserved are the contract headers (docs/architecture.md, "Message contract"): a
// row's headers column cannot override them.
var reserved = func() map[string]bool {
	m := map[string]bool{}
	for _, h := range schema.ContractHeaders {
		m[h] = true
	}
	return m
}()
