// Package pgerr names the PostgreSQL error conditions the operator and the worker
// act on, so the SQLSTATE codes are spelled once.
package pgerr

import (
	"errors"

	"github.com/lib/pq"
)

// UndefinedTable is SQLSTATE 42P01: a table that migrate has not created yet (an
// older schema, or spec.source.migrate false before the owner ran it).
const UndefinedTable = "42P01"

// IsUndefinedTable reports whether err (or anything it wraps) is SQLSTATE 42P01.
func IsUndefinedTable(err error) bool {
	return Is(err, UndefinedTable)
}

// Is reports whether err (or anything it wraps) is a PostgreSQL error with code.
func Is(err error, code string) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && string(pqErr.Code) == code
}
