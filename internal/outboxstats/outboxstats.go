// Package outboxstats reads the lag and dead counts of an outbox table, and what its
// relay workers report about their brokers, for the operator's status: a handful of
// cheap queries inside a read-only transaction with a statement timeout, so a slow or
// unreachable database costs one bounded wait (Timeout) and never more. For a v1
// table they only touch the partial indexes (non-terminal statuses, DEAD, SENT) and
// the small workers table (docs/operations.md, "What a v1 table is"); for a v2 table
// the shard, tick, hold and batch tables and a bounded count of the open windows
// through the (shard, seq) index (v2.go, docs/contract-v2.md).
package outboxstats

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/pgerr"
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/pgversion"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// Timeout bounds every read of this package (on the client, and on the server as the
// transaction's statement_timeout), or the caller's deadline when that is earlier.
// Why 3 s: the queries are index probes that answer in milliseconds on a healthy
// database, so only a database that is down or overloaded ever reaches it; the
// operator reads each pipeline once per statusInterval (at least 5 s, enforced by the
// CRD) with several reconciles in parallel, so an unreachable database costs its own
// pipeline one 3 s wait per pass, inside the interval, and never stalls the others.
const Timeout = 3 * time.Second

// setStatementTimeout makes the server give up at Timeout too, even if the client's
// cancel request is lost.
var setStatementTimeout = fmt.Sprintf(`SET LOCAL statement_timeout = %d`, Timeout.Milliseconds())

// bounded limits ctx to Timeout.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, Timeout)
}

// Stats is one snapshot of the table.
type Stats struct {
	Pending       int64
	Sending       int64
	Retrying      int64
	ExpiredLeases int64
	Dead          int64
	// OldestPending is the created_at of the oldest PENDING, SENDING or RETRY row
	// (v2: of the oldest row in an open window or open hold row; zero when none): now
	// minus it is the publish lag.
	OldestPending time.Time
	// LastPublish is the newest sent_at (v2: the newest batch log row that published
	// an event; zero when nothing was sent yet).
	LastPublish time.Time
	// PendingEstimated: Pending is partly extrapolated (a v2 table whose open windows
	// hold more rows than a read counts exactly: PendingCountBudget); always false
	// for v1.
	PendingEstimated bool
	// Workers is what the running relay workers report about their brokers.
	Workers Workers
	// Contract is the table's contract as detected (the operator compares it with
	// the pipeline's spec.source.contract).
	Contract schema.Contract
}

// ErrTableMissing is returned (wrapped) when the outbox table does not exist.
var ErrTableMissing = errors.New("outbox table does not exist")

// Read takes one snapshot of table t and of its workers' broker reports (Workers).
// The statements depend on the table's contract (v1 or v2, schema.DetectContract),
// detected on the first read of t through db and cached (contract.go). A server
// outside the supported PostgreSQL range is refused with an error that errors.Is
// pgversion.ErrUnsupported. The error never contains a DSN.
func Read(ctx context.Context, db *sql.DB, t pgident.Table) (Stats, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	c, cached := contracts.get(db, t)
	s, err := read(ctx, db, t, c, cached)
	if err != nil && cached && contractChanged(err) {
		// The table is not what it was: detect its contract again.
		contracts.drop(db, t)
		s, err = read(ctx, db, t, schema.Contract{}, false)
	}
	return s, err
}

// read is one Read in one read-only transaction; c is t's contract when known,
// otherwise it is detected first (and cached after a successful read).
func read(ctx context.Context, db *sql.DB, t pgident.Table, c schema.Contract, known bool) (Stats, error) {
	var s Stats
	// REPEATABLE READ: the statements of a v2 read must see one snapshot. Under READ
	// COMMITTED a batch's advance committing between the window count and the hold
	// count could count its held events twice (a gauge read 4 pending for 2 events once).
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
	if err != nil {
		return s, classify(t, err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	if _, err := tx.ExecContext(ctx, setStatementTimeout); err != nil {
		return s, classify(t, err)
	}
	// First, so an unsupported server is named as such (pgversion.ErrUnsupported) and
	// not by whatever SQL error its catalogs would give below.
	if err := pgversion.CheckServer(ctx, tx); err != nil {
		return s, classify(t, err)
	}
	if !known {
		detections.Add(1)
		if c, err = schema.DetectContractTx(ctx, tx, t); err != nil {
			return s, classify(t, err)
		}
	}
	switch c.Version {
	case schema.ContractNone:
		return s, missing(t)
	case schema.ContractV1:
		err = readV1(ctx, tx, t, &s)
	case schema.ContractV2:
		err = readV2(ctx, tx, t, c, &s)
	default:
		err = fmt.Errorf("outbox table %s follows table contract version %d, which this operator does not know: upgrade the operator", t, c.Version)
	}
	if err != nil {
		return s, classify(t, err)
	}
	// Last on purpose: a missing workers table aborts the transaction (see readWorkers).
	if s.Workers, err = readWorkers(ctx, tx, t); err != nil {
		return s, err
	}
	if !known {
		contracts.put(db, t, c)
	}
	s.Contract = c
	return s, nil
}

// readV1 fills s from the status columns of a v1 table.
func readV1(ctx context.Context, tx *sql.Tx, t pgident.Table, s *Stats) error {
	var oldest, last sql.NullTime
	err := tx.QueryRowContext(ctx, hotSetSQL(t)).Scan(&s.Pending, &s.Sending, &s.Retrying, &s.ExpiredLeases, &oldest)
	if err != nil {
		return err
	}
	if err := tx.QueryRowContext(ctx, deadCountSQL(t)).Scan(&s.Dead); err != nil {
		return err
	}
	if err := tx.QueryRowContext(ctx, lastPublishSQL(t)).Scan(&last); err != nil {
		return err
	}
	if oldest.Valid {
		s.OldestPending = oldest.Time
	}
	if last.Valid {
		s.LastPublish = last.Time
	}
	return nil
}

// hotSetSQL counts the non-terminal rows by status. The WHERE clause equals the
// dispatch index's predicate, so only the hot set is read.
func hotSetSQL(t pgident.Table) string {
	return `SELECT
    count(*) FILTER (WHERE status = '` + schema.StatusPending + `'),
    count(*) FILTER (WHERE status = '` + schema.StatusSending + `'),
    count(*) FILTER (WHERE status = '` + schema.StatusRetry + `'),
    count(*) FILTER (WHERE status = '` + schema.StatusSending + `' AND lease_until < now()),
    min(created_at)
FROM ` + t.Qualified() + ` WHERE status IN ` + schema.NonTerminalIn
}

// deadCountSQL reads the partial index on (created_at) WHERE status = 'DEAD'.
func deadCountSQL(t pgident.Table) string {
	return `SELECT count(*) FROM ` + t.Qualified() + ` WHERE status = '` + schema.StatusDead + `'`
}

// lastPublishSQL is one probe of the partial index on (sent_at) WHERE status = 'SENT'.
func lastPublishSQL(t pgident.Table) string {
	return `SELECT max(sent_at) FROM ` + t.Qualified() + ` WHERE status = '` + schema.StatusSent + `'`
}

// ReplayAudit is the audit row of one replay (written by `relayworker replay`).
type ReplayAudit struct {
	Phase                                   string
	Matched, Replayed, Succeeded, DeadAgain int64
}

// ReadReplayAudit reads the audit row of replayID; found is false when the worker has
// not written it yet.
func ReadReplayAudit(ctx context.Context, db *sql.DB, t pgident.Table, replayID string) (a ReplayAudit, found bool, err error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	err = db.QueryRowContext(ctx, replayAuditSQL(t), replayID).
		Scan(&a.Phase, &a.Matched, &a.Replayed, &a.Succeeded, &a.DeadAgain)
	if errors.Is(err, sql.ErrNoRows) {
		return a, false, nil
	}
	if err != nil {
		return a, false, classify(t.WithSuffix(schema.ReplayAuditSuffix), err)
	}
	return a, true, nil
}

func replayAuditSQL(t pgident.Table) string {
	return `SELECT phase, matched, replayed, succeeded, dead_again FROM ` +
		t.WithSuffix(schema.ReplayAuditSuffix).Qualified() + ` WHERE replay_id = $1`
}

func classify(t pgident.Table, err error) error {
	if pgerr.IsUndefinedTable(err) {
		return missing(t)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("database did not answer within the timeout: %w", err)
	}
	return err
}

// missing is ErrTableMissing for t.
func missing(t pgident.Table) error {
	return fmt.Errorf("%w: %s (run `relayworker migrate` or set spec.source.migrate: true)", ErrTableMissing, t)
}

// Hash is a short, non-reversible fingerprint of a secret value.
func Hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}
