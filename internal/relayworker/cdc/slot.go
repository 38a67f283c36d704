// slot.go: the reader's lock.

package cdc

import (
	"context"
	"database/sql"
)

// lockKey names the session advisory lock that makes one worker the slot's reader.
func lockKey(slot string) string { return "outbox-cdc:" + slot }

// tryLock takes the reader lock on conn without waiting.
func tryLock(ctx context.Context, conn *sql.Conn, slot string) (bool, error) {
	var ok bool
	err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(hashtext($1))`, lockKey(slot)).Scan(&ok)
	return ok, err
}

func unlock(ctx context.Context, conn *sql.Conn, slot string) {
	_, _ = conn.ExecContext(ctx, `SELECT pg_advisory_unlock(hashtext($1))`, lockKey(slot))
}
