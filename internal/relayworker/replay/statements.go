// statements.go: the SQL a replay runs, per table contract. The flow (replay.go,
// match.go, handback.go, audit.go) is one; what differs is where DEAD rows live and
// how one goes back to the relay:
//   - v1 (docs/operations.md, "What a v1 table is"): the outbox row itself, DEAD ->
//     PENDING with retry_count 0; the relay's claim takes it again;
//   - v2 (docs/contract-v2.md, "Hold table"): the copy in <table>_hold, DEAD -> RETRY
//     with attempts 0, due now; the shard's owner publishes it from the hold table
//     (shardstore.DueHolds) and deletes the row once Kafka stored it, so a replayed
//     id that is gone from the hold table was sent.

package replay

import (
	"github.com/outbox-operator/outbox-operator/internal/pgident"
	"github.com/outbox-operator/outbox-operator/internal/schema"
)

// statements are one contract's replay SQL.
type statements struct {
	// deadFrom is the relation holding the DEAD rows, stateCol its state column; the
	// selector's columns (selector.where) have the same names in both.
	deadFrom, stateCol string
	// handBack turns $1 ids that are still DEAD back over to the relay for replay $2.
	handBack string
	// count returns how many of $1 ids were sent, are DEAD, are still in flight.
	count string
}

// statementsFor returns the replay SQL of a table following contract version.
func statementsFor(t pgident.Table, version int) statements {
	if version == schema.ContractV2 {
		return v2Statements(t)
	}
	return v1Statements(t)
}

func v1Statements(t pgident.Table) statements {
	return statements{
		deadFrom: t.Qualified(),
		stateCol: "status",
		handBack: `UPDATE ` + t.Qualified() + `
		SET status = 'PENDING', retry_count = 0, next_retry_at = now(), owner_token = NULL, lease_until = NULL,
		    last_error_code = 'REPLAYED',
		    last_error_message = ` + replayedMessage + `,
		    updated_at = now()
		WHERE event_id = ANY($1) AND status = 'DEAD'`,
		count: `SELECT
		count(*) FILTER (WHERE status = 'SENT'),
		count(*) FILTER (WHERE status = 'DEAD'),
		count(*) FILTER (WHERE status IN ` + schema.NonTerminalIn + `)
		FROM ` + t.Qualified() + ` WHERE event_id = ANY($1)`,
	}
}

// v2Statements: attempts go back to 0 (v1 resets retry_count), due now. A replayed
// RETRY row holds back the newer versions of its aggregate the relay reads after it
// (HELD), as any RETRY row does; versions published before it stay published (v1's
// replay behaves the same: consumers' version guards absorb the older version).
func v2Statements(t pgident.Table) statements {
	hold := t.WithSuffix(schema.HoldSuffix).Qualified()
	return statements{
		deadFrom: hold,
		stateCol: "state",
		handBack: `UPDATE ` + hold + `
		SET state = '` + schema.StatusRetry + `', attempts = 0, next_attempt_at = now(),
		    last_error_code = 'REPLAYED',
		    last_error_message = ` + replayedMessage + `,
		    updated_at = now()
		WHERE event_id = ANY($1) AND state = '` + schema.StatusDead + `'`,
		// A sent hold row is deleted: an id with no hold row was sent.
		count: `SELECT
		count(*) FILTER (WHERE h.event_id IS NULL),
		count(*) FILTER (WHERE h.state = '` + schema.StatusDead + `'),
		count(*) FILTER (WHERE h.state IN ('` + schema.StatusRetry + `', '` + schema.StatusHeld + `'))
		FROM unnest($1::text[]) AS x(event_id) LEFT JOIN ` + hold + ` h ON h.event_id = x.event_id`,
	}
}

// replayedMessage keeps the error the event died of, after the replay's id ($2).
const replayedMessage = `left('replay ' || $2 || ' after ' || coalesce(last_error_code, '') || ': ' || coalesce(last_error_message, ''), 512)`
