package pgerr

import (
	"errors"
	"fmt"
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
