// cloudevents.go: the CloudEvents Kafka protocol binding in binary mode
// (docs/architecture.md, "Message contract", "CloudEvents format"): the contract's
// fields become ce_* headers, key and value stay as they are.

package publish

import (
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-operator/outbox-operator/internal/relayworker/event"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// ceReserved are the headers the CloudEvents format sets itself; a row's headers
// column cannot override them. content-type is reserved only when the format sets one
// (a bytea payload's row may name its own).
var ceReserved = map[string]bool{schema.CESpecVersion: true, schema.CEID: true, schema.CESource: true, schema.CEType: true,
	schema.CETime: true, schema.CESubject: true, schema.CEEventVersion: true, schema.CEAggregateType: true, schema.CEAggregateVersion: true}

// ContentTypeFor is the datacontenttype for a payload column type: JSON for json and
// jsonb, UTF-8 text for text, none for bytea (the bytes are the producer's format; a
// row may say which in its own content-type header).
func ContentTypeFor(columnType string) string {
	switch columnType {
	case "jsonb", "json":
		return "application/json"
	case "text":
		return "text/plain; charset=utf-8"
	}
	return ""
}

// ceHeaders are the CloudEvents attributes of r.
func (f Format) ceHeaders(r *event.Row) []kafka.Header {
	hdrs := []kafka.Header{
		{Key: schema.CESpecVersion, Value: []byte("1.0")},
		{Key: schema.CEID, Value: []byte(r.EventID)},
		{Key: schema.CESource, Value: []byte(f.Source)},
		{Key: schema.CEType, Value: []byte(r.EventType)},
		{Key: schema.CETime, Value: []byte(r.CreatedAt.UTC().Format(time.RFC3339Nano))},
		{Key: schema.CEEventVersion, Value: []byte(strconv.Itoa(r.EventVersion))},
		{Key: schema.CEAggregateType, Value: []byte(r.AggregateType)},
		{Key: schema.CEAggregateVersion, Value: []byte(strconv.FormatInt(r.AggregateVersion, 10))},
	}
	if r.AggregateID != "" { // subject, when present, must not be empty
		hdrs = append(hdrs, kafka.Header{Key: schema.CESubject, Value: []byte(r.AggregateID)})
	}
	if f.ContentType != "" {
		hdrs = append(hdrs, kafka.Header{Key: schema.CEContentType, Value: []byte(f.ContentType)})
	}
	return hdrs
}

// ceReservedHeader reports whether a row header named k would override an attribute.
// The native contract names are refused too: a consumer (inbox.FromKafka) that sees
// event_id reads the native format.
func (f Format) ceReservedHeader(k string) bool {
	return ceReserved[k] || reserved[k] || (k == schema.CEContentType && f.ContentType != "")
}
