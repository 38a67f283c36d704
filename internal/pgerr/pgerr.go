// Package pgerr names the PostgreSQL error conditions the operator and the worker
// act on, so the SQLSTATE codes are spelled once.
package pgerr

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/lib/pq"
)

// UndefinedTable is SQLSTATE 42P01: a table that migrate has not created yet (an
// older schema, or spec.source.migrate false before the owner ran it).
const UndefinedTable = "42P01"

// UndefinedColumn is SQLSTATE 42703: a statement of one table contract on a table
// that follows the other (a v1 statement on a table upgraded to v2).
const UndefinedColumn = "42703"

// LockNotAvailable is SQLSTATE 55P03: lock_timeout ended a wait for a lock.
const LockNotAvailable = "55P03"

// QueryCanceled is SQLSTATE 57014: statement_timeout (or a cancel request) stopped
// the statement.
const QueryCanceled = "57014"

// IsUndefinedTable reports whether err (or anything it wraps) is SQLSTATE 42P01.
func IsUndefinedTable(err error) bool {
	return Is(err, UndefinedTable)
}

// Is reports whether err (or anything it wraps) is a PostgreSQL error with code.
func Is(err error, code string) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && string(pqErr.Code) == code
}

// IsConnection reports whether err says the connection to the database failed or
// the server is going away (as opposed to a statement the server rejected): a broken
// or refused connection, SQLSTATE class 08 (connection exception), or 57P01-57P03
// (admin/crash shutdown, cannot connect now). Callers retry these without charging
// the work they were doing: it is no fault of the work.
func IsConnection(err error) bool {
	if err == nil {
		return false
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		c := string(pqErr.Code)
		return strings.HasPrefix(c, "08") || c == "57P01" || c == "57P02" || c == "57P03"
	}
	var netErr net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.As(err, &netErr)
}

// IsTransient reports whether retrying the same work later can succeed without
// anything else changing: a connection fault (IsConnection), a serialization failure
// or deadlock (40001, 40P01), a lock or statement timeout (55P03, 57014), or the
// server running short of resources (class 53).
func IsTransient(err error) bool {
	if IsConnection(err) {
		return true
	}
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) {
		return false
	}
	switch c := string(pqErr.Code); {
	case c == "40001", c == "40P01", c == "55P03", c == QueryCanceled, strings.HasPrefix(c, "53"):
		return true
	}
	return false
}
