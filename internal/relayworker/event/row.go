// Package event holds the one type the claim and the publisher share: a claimed outbox
// row. It lives apart from both so that neither depends on the other; store fills it
// from the claim statement, publish turns it into a Kafka message.
package event

import "time"

// Row is one claimed outbox event (the columns are docs/architecture.md, "Table
// contract").
type Row struct {
	EventID          string
	AggregateType    string
	AggregateID      string
	AggregateVersion int64
	EventType        string
	EventVersion     int
	Destination      string
	MessageKey       string
	Payload          []byte // jsonb text or raw bytea
	Headers          []byte // raw jsonb text; nil when SQL NULL
	RetryCount       int
	CreatedAt        time.Time
	// Age is now() - created_at on the database clock at claim time.
	Age time.Duration
	// Expired is true when the row was taken over from an expired SENDING lease.
	Expired bool
}
