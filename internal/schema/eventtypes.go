// eventtypes.go: the SQL types of an outbox table's payload and headers columns,
// which a v2 table and its side tables (hold, archive) share.

package schema

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// EventTypes are the SQL types of an outbox table's payload and headers columns. A
// new v2 table takes json for both (the producer's bytes, as written); a v1 table
// upgraded to v2 gets json where it had json or jsonb, and keeps text or bytea
// (upgraded): there is no cast from bytea to json (a payload need not be JSON at all)
// nor an assignment cast from text, so those producers' INSERTs, and the upgrade's
// copy, failed. The hold table and the archive copy events, so they take the same
// types.
type EventTypes struct {
	Payload, Headers string
}

// NewTableEventTypes are the types of a table migrate creates.
var NewTableEventTypes = EventTypes{Payload: "json", Headers: "json"}

var (
	payloadTypes = []string{"json", "jsonb", "text", "bytea"}
	headersTypes = []string{"json", "jsonb", "text"}
)

// upgraded are the types of the v2 table an upgrade makes of a v1 table of types e.
func (e EventTypes) upgraded() EventTypes {
	toJSON := func(typ string) string {
		if typ == "jsonb" {
			return "json"
		}
		return typ
	}
	return EventTypes{Payload: toJSON(e.Payload), Headers: toJSON(e.Headers)}
}

// column is typ as a column type in the DDL's layout (padded to its type column).
func (EventTypes) column(typ string) string { return fmt.Sprintf("%-12s", typ) }

// Valid says whether the relay can send events of these types.
func (e EventTypes) Valid() error {
	if !slices.Contains(payloadTypes, e.Payload) {
		return fmt.Errorf("payload column type %q is not supported (json, jsonb, text or bytea)", e.Payload)
	}
	if !slices.Contains(headersTypes, e.Headers) {
		return fmt.Errorf("headers column type %q is not supported (json, jsonb or text)", e.Headers)
	}
	return nil
}

// tableEventTypes reads t's payload and headers column types and checks them.
func tableEventTypes(ctx context.Context, q queryer, t pgident.Table) (EventTypes, error) {
	var payload, headers sql.NullString
	err := q.QueryRowContext(ctx, `SELECT
    (SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'payload' AND NOT attisdropped),
    (SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'headers' AND NOT attisdropped)`,
		t.Qualified()).Scan(&payload, &headers)
	e := EventTypes{Payload: payload.String, Headers: headers.String}
	if err != nil {
		return e, fmt.Errorf("read the payload and headers column types of %s: %w", t, err)
	}
	if err := e.Valid(); err != nil {
		return e, fmt.Errorf("outbox table %s: %w", t, err)
	}
	return e, nil
}
