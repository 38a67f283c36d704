// message.go: one claimed row -> one Kafka message (docs/architecture.md, "Message
// contract"), and the per-row data problems found before anything is sent.

package publish

import (
	"encoding/json"
	"errors"
	"fmt"
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
	hdrs, isReserved := nativeHeaders(r), reservedNative
	if f.CloudEvents {
		if r.EventType == "" {
			return kafka.Message{}, &BadEventError{CodeInvalidHeaders, "event_type is empty (CloudEvents requires ce_type)"}
		}
		hdrs, isReserved = f.ceHeaders(r), f.ceReservedHeader
	}
	if len(r.Headers) > 0 && string(r.Headers) != "null" {
		extra, err := parseHeaders(r.Headers, isReserved)
		if err != nil {
			return kafka.Message{}, &BadEventError{CodeInvalidHeaders, err.Error()}
		}
		for _, kv := range extra {
			hdrs = append(hdrs, kafka.Header{Key: kv[0], Value: []byte(kv[1])})
		}
	}
	return kafka.Message{Topic: r.Destination, Key: []byte(r.MessageKey), Value: r.Payload, Headers: hdrs}, nil
}

// nativeHeaders are the native format's contract headers of r.
func nativeHeaders(r *event.Row) []kafka.Header {
	return []kafka.Header{
		{Key: schema.HeaderEventID, Value: []byte(r.EventID)},
		{Key: schema.HeaderEventType, Value: []byte(r.EventType)},
		{Key: schema.HeaderEventVersion, Value: []byte(strconv.Itoa(r.EventVersion))},
		{Key: schema.HeaderAggregateType, Value: []byte(r.AggregateType)},
		{Key: schema.HeaderAggregateID, Value: []byte(r.AggregateID)},
		{Key: schema.HeaderAggregateVersion, Value: []byte(strconv.FormatInt(r.AggregateVersion, 10))},
	}
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

// parseHeaders accepts only a JSON object whose values are all strings, and returns
// the pairs in a deterministic (document) order; a name isReserved is refused.
func parseHeaders(raw []byte, isReserved func(string) bool) ([][2]string, error) {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("headers are not valid JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("headers must be a JSON object of string values")
	}
	var out [][2]string
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("headers are not valid JSON: %v", err)
		}
		k := kt.(string)
		vt, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("headers are not valid JSON: %v", err)
		}
		v, ok := vt.(string)
		if !ok {
			return nil, fmt.Errorf("header %q is not a string (headers must be an object of string values)", k)
		}
		if k == "" {
			return nil, errors.New("header with an empty name")
		}
		if isReserved(k) {
			return nil, fmt.Errorf("header %q is reserved for the relay's contract headers", k)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}
