package pgerr

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/lib/pq"
)

func TestIsUndefinedTable(t *testing.T) {
	wrapped := fmt.Errorf("read stats: %w", &pq.Error{Code: "42P01"})
	if !IsUndefinedTable(wrapped) {
		t.Error("a wrapped 42P01 is not recognised")
	}
	if IsUndefinedTable(&pq.Error{Code: "42501"}) {
		t.Error("42501 (insufficient_privilege) taken for undefined_table")
	}
	if IsUndefinedTable(errors.New("42P01")) || IsUndefinedTable(nil) {
		t.Error("a non-PostgreSQL error taken for undefined_table")
	}
}

func TestIsConnection(t *testing.T) {
	for _, err := range []error{
		&pq.Error{Code: "08006"}, &pq.Error{Code: "57P01"}, fmt.Errorf("exec: %w", driver.ErrBadConn),
		io.ErrUnexpectedEOF, &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED},
	} {
		if !IsConnection(err) {
			t.Errorf("IsConnection(%v) = false", err)
		}
	}
	for _, err := range []error{nil, &pq.Error{Code: "23505"}, &pq.Error{Code: "40001"}, errors.New("handler said no")} {
		if IsConnection(err) {
			t.Errorf("IsConnection(%v) = true", err)
		}
	}
}

func TestIsTransient(t *testing.T) {
	for _, err := range []error{&pq.Error{Code: "40001"}, &pq.Error{Code: "40P01"}, &pq.Error{Code: "53300"}, io.ErrUnexpectedEOF} {
		if !IsTransient(err) {
			t.Errorf("IsTransient(%v) = false", err)
		}
	}
	// A statement the server rejects for its content fails again the same way.
	for _, err := range []error{&pq.Error{Code: "22021"}, &pq.Error{Code: "54000"}, &pq.Error{Code: "25P02"}, errors.New("x")} {
		if IsTransient(err) {
			t.Errorf("IsTransient(%v) = true", err)
		}
	}
}
