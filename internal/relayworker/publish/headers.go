// headers.go: the headers column (a JSON object of string values) -> Kafka headers
// after the contract's own (docs/architecture.md, "Message contract").

package publish

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
)

// hasHeaders: r's headers column is not SQL NULL nor JSON null.
func hasHeaders(r *event.Row) bool { return len(r.Headers) > 0 && string(r.Headers) != "null" }

// appendHeaders appends the pairs of raw, the headers column, to hdrs: an object of
// plain string values (no escapes, what producers write almost always) by a scan
// whose values share raw's bytes, anything else by parseHeaders. The scan was added
// for speed (the decoder was two thirds of Message's time in the relay's CPU profile); it accepts
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
