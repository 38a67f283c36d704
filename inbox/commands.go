package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/outbox-operator/outbox-operator/internal/pgident"
)

// CommandTable holds the side effects consumers could not make inside their local
// transaction (an HTTP call, an SMS, a payment API): a command outbox. A handler
// enqueues a command in the same transaction as its dedup row, so the command exists
// exactly when the event's effect does; a dispatcher then makes the call.
const CommandTable = "message_command"

// Command statuses.
const (
	CommandPending = "PENDING" // waiting for its (next) attempt
	CommandRunning = "RUNNING" // claimed by a dispatcher until lease_until
	CommandDone    = "DONE"    // the call returned success
	CommandParked  = "PARKED"  // failed permanently or ran out of attempts
)

// Command is one side effect to make.
type Command struct {
	// Kind names what to do ("send-sms"); the dispatcher's function switches on it.
	Kind string
	// Key is the idempotency key the external system must honour: the same key
	// twice is one effect. It defaults to the event id. A crash between the call and
	// the DONE mark makes a second call with the same key, never a silent drop.
	Key string
	// Payload is what the function needs to make the call.
	Payload []byte
	// Attempt counts the calls so far, this one included (set by the dispatcher).
	Attempt int
}

// Commands enqueues and dispatches one consumer group's commands.
type Commands struct {
	db    *sql.DB
	group string
	table string // quoted schema.message_command
}

// NewCommands returns the command outbox of consumer group `group` in schemaName.
func NewCommands(db *sql.DB, schemaName, group string) (*Commands, error) {
	if group == "" {
		return nil, errors.New("inbox: consumer group is empty")
	}
	if err := pgident.Validate("schema", schemaName); err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	return &Commands{db: db, group: group, table: pgident.Quote(schemaName) + "." + pgident.Quote(CommandTable)}, nil
}

func commandDDL(schemaQ string) []string {
	t := schemaQ + "." + pgident.Quote(CommandTable)
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + t + ` (
    command_id      bigserial   PRIMARY KEY,
    consumer_group  text        NOT NULL,
    kind            text        NOT NULL,
    idempotency_key text        NOT NULL,
    payload         bytea       NULL,
    status          text        NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'RUNNING', 'DONE', 'PARKED')),
    owner_token     text        NULL,
    lease_until     timestamptz NULL,
    attempts        int         NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text        NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    done_at         timestamptz NULL,
    UNIQUE (consumer_group, kind, idempotency_key)
)`,
		`CREATE INDEX IF NOT EXISTS ` + pgident.Quote(CommandTable+"_due_idx") + ` ON ` + t +
			` (consumer_group, next_attempt_at) WHERE status IN ('PENDING', 'RUNNING')`,
	}
}

// Enqueue adds cmd inside tx, the handler's transaction: it commits with the event's
// effect or not at all. An empty Key is refused (use the event id). Enqueueing the
// same (kind, key) twice keeps the first: a redelivered event makes no second call.
func (c *Commands) Enqueue(ctx context.Context, tx *sql.Tx, cmd Command) error {
	if cmd.Kind == "" || cmd.Key == "" {
		return Permanent(errors.New("inbox: a command needs a Kind and a Key (the event id)"))
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO `+c.table+` (consumer_group, kind, idempotency_key, payload)
VALUES ($1, $2, $3, $4) ON CONFLICT (consumer_group, kind, idempotency_key) DO NOTHING`,
		c.group, cmd.Kind, cmd.Key, nullBytes(cmd.Payload))
	if err != nil {
		return fmt.Errorf("inbox: enqueue command %s for %s: %w", cmd.Kind, cmd.Key, err)
	}
	return nil
}

// CommandStatus returns the status and attempts of the command (kind, key), for tests
// and reconciliation.
func (c *Commands) CommandStatus(ctx context.Context, kind, key string) (status string, attempts int, err error) {
	err = c.db.QueryRowContext(ctx, `SELECT status, attempts FROM `+c.table+
		` WHERE consumer_group = $1 AND kind = $2 AND idempotency_key = $3`, c.group, kind, key).Scan(&status, &attempts)
	if err != nil {
		return "", 0, fmt.Errorf("inbox: command %s/%s: %w", kind, key, err)
	}
	return status, attempts, nil
}
