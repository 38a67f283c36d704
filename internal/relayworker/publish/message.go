// message.go: one claimed row -> one Kafka message (docs/architecture.md, "Message
// contract"), and the per-row data problems found before anything is sent.

package publish

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

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
	extra := 0
	if hasHeaders(r) {
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
	if hasHeaders(r) {
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

// hasHeaders: r's headers column is not SQL NULL nor JSON null.
func hasHeaders(r *event.Row) bool { return len(r.Headers) > 0 && string(r.Headers) != "null" }

// appendHeaders appends the pairs of raw, the headers column, to hdrs: an object of
// plain string values (no escapes, what producers write almost always) by a scan
// whose values share raw's bytes, anything else by parseHeaders. The scan was added
// for speed (the decoder took 2 of Message's 4 µs for a two-pair object); it accepts
// exactly what parseHeaders accepts, with the same pairs, and leaves every error to it.
func appendHeaders(hdrs []kafka.Header, raw []byte, isReserved func(string) bool) ([]kafka.Header, error) {
	if out, ok := scanPlainHeaders(hdrs, raw, isReserved); ok {
		return out, nil
	}
	pairs, err := parseHeaders(raw, isReserved)
	if err != nil {
		return nil, err
	}
	for _, kv := range pairs {
		hdrs = append(hdrs, kafka.Header{Key: kv[0], Value: []byte(kv[1])})
	}
	return hdrs, nil
}

// scanPlainHeaders is appendHeaders' scan: ok false for anything but a well-formed
// object of unescaped strings with non-empty, unreserved names in valid UTF-8.
func scanPlainHeaders(hdrs []kafka.Header, raw []byte, isReserved func(string) bool) ([]kafka.Header, bool) {
	if !utf8.Valid(raw) {
		return nil, false
	}
	names := string(raw) // one copy for every name
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '{' {
		return nil, false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return hdrs, skipSpace(raw, i+1) == len(raw)
	}
	for {
		ks, ke, ok := plainString(raw, i)
		if !ok || ke == ks {
			return nil, false
		}
		i = skipSpace(raw, ke+1)
		if i == len(raw) || raw[i] != ':' {
			return nil, false
		}
		vs, ve, ok := plainString(raw, skipSpace(raw, i+1))
		if !ok || isReserved(names[ks:ke]) {
			return nil, false
		}
		hdrs = append(hdrs, kafka.Header{Key: names[ks:ke], Value: raw[vs:ve:ve]})
		i = skipSpace(raw, ve+1)
		switch {
		case i < len(raw) && raw[i] == ',':
			i = skipSpace(raw, i+1)
		case i < len(raw) && raw[i] == '}':
			return hdrs, skipSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}

// plainString finds the string starting at raw[i] ('"'): its contents are
// raw[start:end] and raw[end] is the closing quote. ok false at an escape, a control
// character or the end of raw.
func plainString(raw []byte, i int) (start, end int, ok bool) {
	if i >= len(raw) || raw[i] != '"' {
		return 0, 0, false
	}
	for j := i + 1; j < len(raw); j++ {
		switch c := raw[j]; {
		case c == '"':
			return i + 1, j, true
		case c == '\\' || c < 0x20:
			return 0, 0, false
		}
	}
	return 0, 0, false
}

// skipSpace skips JSON whitespace from raw[i].
func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

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
